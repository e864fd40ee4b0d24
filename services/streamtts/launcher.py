"""``streamtts up``: the whole system on one machine, in one process tree.

Redis (``REDIS_URL``, or an embedded server with AOF on), then intake, edge and synth as child
processes (each exactly as compose runs it: ``python -m <service>``), and the front proxy in
this process. Ctrl-C or SIGTERM stops everything it started; the children also die with it
if it is killed outright (PR_SET_PDEATHSIG), so nothing is left behind.

Only the proxy reaches intake and edge: they listen on Unix sockets in a folder of this run that
only its user may open, and believe the X-Forwarded-For of that socket alone
(``FORWARDED_ALLOW_IPS=unix``), so no other local process can claim another client's address.
The embedded Redis wants the state dir's password (``redis.password``, owner-only).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from redis.asyncio import Redis

from blobstore import StoreConfig
from castlog.migrate import migrate_to_lanes
from durablestreams.keys import migrate_durable_keys
from servicekit import UNIX_PEER, connect, redact
from servicekit.crosssite import ALLOWED_HOSTS, host_name
from servicekit.runner import stop_or
from servicekit.settings import CONTENT_KEY, FORWARDED_ALLOW_IPS, REDIS_URL, declaration, raw_of, value_of
from synth.config import SynthConfig

from . import doorway
from .config import environment
from .proxy import Limits, Upstreams, create_app, readiness, ready_body, runner, session_for
from .redisserver import RedisServer, die_with_parent, free_port, owner_secret, start_server, wait_or_kill
from .serverchoice import PASSWORD_FILE, Server, redis_password
from .voicepacks import model_dir

log = logging.getLogger("streamtts")
log_access = logging.getLogger("streamtts.access")
ACCESS_LOG_FORMAT = "%r %s %b %Tfs"  # GET /c/x HTTP/1.1 200 1234 0.002000s

SERVICES = ("intake", "edge", "synth")
# A stop waits for each child this much longer than synth's SYNTH_GRACE_S (in which synth
# finishes the chunk in hand and exits), then kills it.
CHILD_GRACE_MARGIN_S = 5.0


def child_grace_s(environ: Mapping[str, str]) -> float:
    """How long a stop waits for a child: synth's grace as the children get it, and a margin."""
    return float(value_of(SynthConfig, "grace_s", environ)) + CHILD_GRACE_MARGIN_S


def synth_env(name: str) -> str:
    """The variable behind synth's setting ``name`` (the launcher sets a few for its child)."""
    return declaration(SynthConfig, name).env
READY_POLL_S = 0.5


# The services that listen on a Unix socket of the run's folder; synth serves only its metrics
# and probes (on a loopback port), and takes no client's address.
ON_SOCKETS = frozenset({"intake", "edge"})
# The longest Unix socket path Linux takes (sun_path is 108 bytes, one for its terminating NUL).
MAX_SOCKET_PATH = 107


@dataclass
class Child:
    name: str
    port: int = 0  # synth: its metrics and probes on 127.0.0.1
    socket: str = ""  # intake, edge: the Unix socket that only the proxy reaches
    proc: subprocess.Popen[bytes] | None = None
    ready: bool = False

    @property
    def upstream(self) -> str:
        """Where it answers HTTP, as the proxy names an upstream: a socket's path or a base URL."""
        return self.socket or f"http://127.0.0.1:{self.port}"


def runtime_dir() -> Path:
    """A new folder for this run's sockets, that only this user may open (mode 0700)."""
    made = Path(tempfile.mkdtemp(prefix="streamtts-up-"))
    if len(str(made / "intake.sock")) > MAX_SOCKET_PATH:
        shutil.rmtree(made, ignore_errors=True)
        raise RuntimeError(f"the temporary folder {made.parent} has too long a path for a Unix socket; "
                           "set TMPDIR to a shorter one (e.g. /tmp)")
    return made


@dataclass(frozen=True)
class Options:
    """``up``'s command line as ``cli.run_up`` read and checked it."""
    host: str
    port: int
    state_dir: Path  # absolute: children and Redis run in other working directories
    redis: str | Server  # REDIS_URL, or the state dir's server to start (serverchoice.choose)
    services: tuple[str, ...]
    limits: Limits  # the proxy's: its settings, and what intake takes
    access_log: bool  # a concise line per request through the proxy (--log-level debug)
    wyoming_port: int  # intake's Wyoming server, on `host` (0: none)
    hosts: frozenset[str]  # STREAMTTS_ALLOWED_HOSTS as up applies it (local_hosts)

    @property
    def origin(self) -> str:
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


# The names a local origin answers to besides address literals: a browser's way to it.
LOCAL_NAMES = frozenset({"localhost"})


def local_hosts(host: str, configured: frozenset[str]) -> frozenset[str]:
    """The host names ``up`` answers to: localhost, ``--host`` when it is a name, and the
    configured ones (a rebound name is refused: servicekit.crosssite)."""
    name = host_name(host) if host and ":" not in host else None
    return LOCAL_NAMES | configured | ({name} if name else set())


# The deployment's key of content ids, made once per state dir (servicekit.settings.CONTENT_KEY).
CONTENT_KEY_FILE = "content.key"


def content_key(state_dir: Path) -> str:
    """The state dir's content key, made (random, owner-only) on the first call: the same one on
    every start, so that a repeated text stays one cast."""
    return owner_secret(state_dir / CONTENT_KEY_FILE)


def port_in_use(host: str, port: int) -> bool:
    """Whether ``host:port`` cannot be bound now (checked before anything starts)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: TIME_WAIT is no conflict
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def consumer_name(state_dir: Path) -> str:
    """synth's consumer name under ``up``: the same on every start from the same state dir, so a
    restarted worker re-reads its own pending jobs at once instead of waiting out their lease."""
    digest = hashlib.sha256(str(state_dir).encode()).hexdigest()[:8]
    return f"{socket.gethostname()}-up-{digest}"


def available(name: str) -> bool:
    """Whether a service package with a ``__main__`` is installed (``up`` runs what exists)."""
    return importlib.util.find_spec(f"{name}.__main__") is not None


def _spawn(child: Child, redis_url: str, options: Options) -> subprocess.Popen[bytes]:
    state_dir = options.state_dir
    env = environment()
    env[REDIS_URL.env] = redis_url
    env[ALLOWED_HOSTS.env] = ",".join(sorted(options.hosts))  # intake's own port checks them too
    if raw_of(CONTENT_KEY, env) is None:
        env[CONTENT_KEY.env] = content_key(state_dir)
    env.setdefault(synth_env("cache_dir"), str(state_dir / "model-cache"))
    # finished audio leaves Redis
    env.setdefault(declaration(StoreConfig, "url").env, (state_dir / "archive").resolve().as_uri())
    if (model_dir(state_dir) / "voices").is_dir():  # none installed: no warning about a missing folder each start
        env.setdefault(synth_env("model_dir"), str(model_dir(state_dir)))  # the packs `voices install` put there
    env.setdefault(synth_env("consumer"), consumer_name(state_dir))
    if child.name == "synth":
        env[synth_env("metrics_host")], env[synth_env("metrics_port")] = "127.0.0.1", str(child.port)
    else:  # its socket, and the proxy behind it the only one believed (whatever the environment said)
        upper = child.name.upper()
        env[f"{upper}_SOCKET"], env[f"{upper}_HOST"] = child.socket, "127.0.0.1"  # the host: a metrics port's
        env[FORWARDED_ALLOW_IPS.env] = UNIX_PEER
    if child.name == "intake" and options.wyoming_port:  # the Wyoming server, on the origin's host
        from intake.config import Config as IntakeConfig  # here: intake's package loads its audio tools

        env[declaration(IntakeConfig, "wyoming_port").env] = str(options.wyoming_port)
        env[declaration(IntakeConfig, "wyoming_host").env] = options.host
    return subprocess.Popen(
        [sys.executable, "-m", child.name], env=env, stdin=subprocess.DEVNULL,
        start_new_session=True,  # our own signals only: Ctrl-C reaches us, we stop them in order
        preexec_fn=die_with_parent,
    )


class Launcher:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.server: RedisServer | None = None
        self.runtime: Path | None = None  # the run's sockets (runtime_dir), made when it starts
        self.children: list[Child] = []
        self.missing = [name for name in options.services if not available(name)]
        self.stopping = asyncio.Event()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stopping.set)
        redis: Redis | None = None
        serving: doorway.Serving | None = None
        try:
            redis_url = self._redis()
            redis = await self._connect(redis_url)
            if redis is None:
                return 0
            moved = await migrate_keys(redis)  # data written before lanes (migrate_keys below)
            if moved:
                log.info("moved %d key(s) written before lanes to the lane layout", moved)
            self.runtime = runtime_dir()
            self.children = [self._child(name) for name in self.options.services if available(name)]
            for child in self.children:
                child.proc = _spawn(child, redis_url, self.options)
                log.info("started %s (pid %d)", child.name, child.proc.pid)
            for name in self.missing:
                log.warning("%s is not installed; running without it", name)
            # each one's socket (_child); one not running: a socket nobody listens on (503)
            upstreams = Upstreams(intake=str(self.runtime / "intake.sock"), edge=str(self.runtime / "edge.sock"))
            limits = self.options.limits
            app = create_app(redis, upstreams, limits, self.options.hosts)
            app_runner = runner(app, access_log=log_access if self.options.access_log else None,
                                access_log_format=ACCESS_LOG_FORMAT)
            await app_runner.setup()
            serving = await doorway.serve(app_runner, self.options.host, self.options.port,
                                          limits.settings.proxy_header_timeout_s,
                                          limits.settings.proxy_connections_per_client)
            log.info("proxy on %s; waiting for the services", self.options.origin)
            return await self._watch(app)
        finally:
            if serving is not None:
                await serving.close()
            await self._stop_children()
            if self.runtime is not None:
                shutil.rmtree(self.runtime, ignore_errors=True)
            if redis is not None:
                await redis.aclose()
            if self.server is not None:
                self.server.stop()
                log.info("stopped the local Redis")

    def _child(self, name: str) -> Child:
        assert self.runtime is not None
        return Child(name, socket=str(self.runtime / f"{name}.sock")) if name in ON_SOCKETS else Child(name, free_port())

    async def _connect(self, url: str) -> Redis | None:
        """A client once Redis answers; None when asked to stop first (connect retries for
        minutes against a wrong REDIS_URL, and Ctrl-C must not wait for that)."""
        connecting = asyncio.ensure_future(connect(url))
        await stop_or(self.stopping, connecting)
        if connecting.done():
            return connecting.result()
        connecting.cancel()
        await asyncio.gather(connecting, return_exceptions=True)
        log.info("stopped before Redis answered")
        return None

    def _redis(self) -> str:
        chosen = self.options.redis
        if isinstance(chosen, str):
            log.info("using Redis at %s", redact(chosen))
            return chosen
        data = self.options.state_dir / "redis"
        # state_dir is absolute: so are --dir and --logfile
        self.server = start_server(data, aof=True, binary=chosen.binary,
                                   password=redis_password(self.options.state_dir))
        log.info("%s on port %d, AOF on, data in %s, its password in %s", chosen.describe(),
                 self.server.port, data, self.options.state_dir / PASSWORD_FILE)
        return self.server.url

    async def _watch(self, app: web.Application) -> int:
        """Report readiness as it comes; return when asked to stop or when a child dies."""
        started = time.monotonic()
        announced = False
        async with AsyncExitStack() as stack:
            sessions = {c.name: await stack.enter_async_context(session_for(c.upstream)) for c in self.children}
            while not self.stopping.is_set():
                for child in self.children:
                    assert child.proc is not None
                    if child.proc.poll() is not None:
                        log.error(
                            "%s exited with code %s; stopping everything. Its log is above: fix what it "
                            "says and run `streamtts up` again (`python -m %s` runs it alone)",
                            child.name, child.proc.returncode, child.name,
                        )
                        return 1
                    if not child.ready and await ready_body(sessions[child.name], child.upstream) is not None:
                        child.ready = True
                        log.info("%s ready after %.1fs", child.name, time.monotonic() - started)
                if not announced and all(c.ready for c in self.children):
                    announced = await self._announce(app)
                try:
                    await asyncio.wait_for(self.stopping.wait(), READY_POLL_S)
                except asyncio.TimeoutError:
                    pass
        log.info("stopping")
        return 0

    async def _announce(self, app: web.Application) -> bool:
        """Print the one line that says the whole system is ready, once it is."""
        ready = await readiness(app)
        if not ready.waiting:
            print(f"StreamTTS ready at {self.options.origin} ({ready.voices} voices, default {ready.default})",
                  flush=True)
        return not ready.waiting

    async def _stop_children(self) -> None:
        running = [c for c in self.children if c.proc is not None and c.proc.poll() is None]
        for child in running:
            assert child.proc is not None
            child.proc.send_signal(signal.SIGTERM)
        grace_s = child_grace_s(environment())
        deadline = time.monotonic() + grace_s
        for child in running:
            assert child.proc is not None
            if not await asyncio.to_thread(wait_or_kill, child.proc, max(0.0, deadline - time.monotonic())):
                log.warning("%s did not stop within %.0fs; killed it", child.name, grace_s)
            log.info("stopped %s (code %s)", child.name, child.proc.returncode)


async def migrate_keys(redis: Redis) -> int:
    """Every step of ``streamtts migrate-keys`` (and of ``up`` at start): cast keys to lanes
    (castlog/migrate.py), durable streams to families (durablestreams/keys.py); returns how many
    keys (casts) and streams (durable) moved. Idempotent."""
    return await migrate_to_lanes(redis) + await migrate_durable_keys(redis)
