"""Shared bits for the deployment tests: paths, external tools, a stub HTTP upstream."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "compose"
K3S = REPO / "k3s"
# Redis's config and start-up scripts: kustomize reads them here, compose mounts this folder.
REDIS_FILES = K3S / "base" / "redis"
DOCKER = REPO / "docker"
VENV_BIN = Path(sys.executable).parent

def tool(name: str) -> str | None:
    """An executable from this Python's environment (pip-installed tools) or from PATH."""
    local = VENV_BIN / name
    if local.is_file():
        return str(local)
    return shutil.which(name)


def require_tool(name: str, install: str) -> str:
    """The tool's path, or skip the test saying how to get it."""
    path = tool(name)
    if path is None:
        pytest.skip(f"{name} is not installed ({install})")
    return path


def run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # type: ignore[call-overload]
        args, capture_output=True, text=True, timeout=60, check=False, **kwargs
    )


Handler = Callable[[BaseHTTPRequestHandler], None]


@contextmanager
def stub_server(handle: Handler) -> Iterator[int]:
    """An HTTP server on a free loopback port that answers every request with `handle`."""

    class Stub(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib's name
            pass

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_OPTIONS = do_PATCH = lambda self: handle(self)  # noqa: E731

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: object, client_address: object) -> None:
            # A proxy that drops a connection mid-response (a refused upload) is expected here.
            if not isinstance(sys.exc_info()[1], ConnectionError):
                super().handle_error(request, client_address)  # type: ignore[arg-type]

    server = Server(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def respond(request: BaseHTTPRequestHandler, status: int, body: bytes,
            content_type: str = "text/plain") -> None:
    request.send_response(status)
    request.send_header("Content-Type", content_type)
    request.send_header("Content-Length", str(len(body)))
    request.end_headers()
    if request.command != "HEAD":
        request.wfile.write(body)


class Started:
    """A process started by `running`, with its log."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.log = log

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL after `timeout`; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return int(self.process.returncode)


@contextmanager
def running(args: list[str], env: Mapping[str, str], log: Path, ready: Callable[[], bool],
            timeout: float = 15.0) -> Iterator[Started]:
    """Start `args`, wait until `ready()` (failing the test with the log if it never is)."""
    with log.open("wb") as out:
        process = subprocess.Popen(args, env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    started = Started(process, log)
    try:
        deadline = time.monotonic() + timeout
        while not _ready(ready):
            if process.poll() is not None:
                pytest.fail(f"{args[0]} exited with {process.returncode}:\n{log.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{args[0]} not ready after {timeout}s:\n{log.read_text()}")
            time.sleep(0.05)
        yield started
    finally:
        started.stop()


def _ready(check: Callable[[], bool]) -> bool:
    try:
        return check()
    except OSError:
        return False


def http_ok(url: str) -> Callable[[], bool]:
    def check() -> bool:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)

    return check


def caddy_env(tmp: Path, proxy_port: int, admin_port: int, intake_port: int,
              edge_port: int) -> dict[str, str]:
    """What compose gives the proxy container, pointed at services on the loopback."""
    return {
        **os.environ,
        "INTAKE_HOST": "127.0.0.1", "INTAKE_PORT": str(intake_port),
        # `dynamic a` looks the name up like Docker's DNS: localhost has one A record.
        "EDGE_HOST": "localhost", "EDGE_PORT": str(edge_port),
        "PROXY_PORT": str(proxy_port), "CADDY_ADMIN": f"127.0.0.1:{admin_port}",
        "XDG_CONFIG_HOME": str(tmp), "XDG_DATA_HOME": str(tmp), "HOME": str(tmp),
    }


@contextmanager
def redis_as_deployed(tmp: Path, port: int, passwords: Mapping[str, str]) -> Iterator[Started]:
    """k3s/base/redis/entrypoint.sh → render-acl.sh → redis-server with redis.conf.

    A stand-in for the image's docker-entrypoint.sh adds what a test needs: a temporary data
    directory and a loopback port.
    """
    import redis

    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "docker-entrypoint.sh"
    fake.write_text(f'#!/bin/sh\nexec "$@" --dir {tmp} --port {port} --bind 127.0.0.1\n')
    fake.chmod(0o755)
    env = {
        **os.environ,
        **{f"REDIS_PASSWORD_{user}": password for user, password in passwords.items()},
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "REDIS_ACL_DIR": str(tmp / "acl"),
    }

    def pong() -> bool:  # as the health checks do: `default` is off
        with redis.Redis(port=port, username="admin", password=passwords["ADMIN"]) as client:
            return bool(client.ping())

    def answers() -> bool:
        try:
            return pong()
        except redis.ConnectionError:
            return False

    with running(["sh", str(REDIS_FILES / "entrypoint.sh")], env, tmp / "redis.log",
                 answers) as started:
        yield started


# The oldest release of each Redis series with the October 2025 Lua fixes (CVE-2025-49844,
# -46817, -46818, -46819); the services run EVAL. Raise these as new security releases appear.
MIN_PATCHED_REDIS = {(6, 2): (6, 2, 20), (7, 2): (7, 2, 11), (7, 4): (7, 4, 6), (8, 0): (8, 0, 4), (8, 2): (8, 2, 2)}


def assert_patched_redis(image: str) -> None:
    """``redis:X.Y.Z-...`` of a series at or above its last known security fix."""
    match = re.fullmatch(r"redis:(\d+)\.(\d+)\.(\d+)(-[\w.]+)?", image.split("#")[0].strip())
    assert match, f"{image}: pin Redis as redis:X.Y.Z-alpine"
    version = tuple(int(part) for part in match.groups()[:3])
    floor = MIN_PATCHED_REDIS.get(version[:2])
    newest_series = max(MIN_PATCHED_REDIS)
    assert (floor is not None and version >= floor) or version[:2] > newest_series, (
        f"{image} lacks Redis's 2025 Lua fixes: use {'.'.join(map(str, floor or MIN_PATCHED_REDIS[newest_series]))} or later"
    )
