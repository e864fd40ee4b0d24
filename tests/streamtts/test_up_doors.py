"""What reaches ``streamtts up``'s services and its Redis (#35's low findings): intake and edge
listen on Unix sockets in a folder only their user may open, so the proxy is the one way in and
the only peer whose X-Forwarded-For they believe; the embedded Redis wants the state dir's
password. Clients through the proxy are still told apart by their loopback source addresses."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import ClientSession, TCPConnector, web
from aiohttp.test_utils import TestServer
from redis import Redis as SyncRedis
from redis.asyncio import Redis

import edge
from servicekit.settings import FORWARDED_ALLOW_IPS
from streamtts.proxy import Upstreams, create_app
from streamtts.redisserver import embedded_binary, free_port, start_server
from streamtts.serverchoice import PASSWORD_FILE
from tests.support.processes import descendants, listening
from tests.support.proxylimits import proxy_limits
from tests.support.waiting import wait_healthy, wait_until

START_S = 60.0
UNKNOWN_CAST = "/api/casts/AAAAAAAAAAAA"  # a well-formed id of no cast: each read spends a token, then 404
LIMITED = {"EDGE_READ_BURST": "2", "EDGE_READ_RATE": "0.001"}  # two reads per client, then 429 for minutes


async def read_from(url: str, address: str, forwarded_for: str | None = None) -> int:
    """One read of an unknown cast from the loopback ``address``, claiming ``forwarded_for``."""
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    async with ClientSession(connector=TCPConnector(local_addr=(address, 0))) as http:
        async with http.get(url + UNKNOWN_CAST, headers=headers) as response:
            return response.status


def test_forwarded_allow_ips_names_the_unix_socket_beside_addresses() -> None:
    parse = FORWARDED_ALLOW_IPS.parse
    assert parse is not None
    assert parse("unix") == frozenset({"unix"})
    assert parse("unix, 10.0.0.0/8") == frozenset({"unix", "10.0.0.0/8"})
    assert parse("none") == frozenset()
    with pytest.raises(ValueError):
        parse("unixx")  # a typo still stops the start


@pytest.fixture
async def edge_on_a_socket(redis_url: str, redis: Redis) -> AsyncIterator[tuple[str, str]]:
    """edge as ``up`` runs it (on a Unix socket, believing that socket alone), and also on a
    loopback port that a local client reaches directly: (the proxy's URL, the port's URL)."""
    folder = tempfile.mkdtemp(prefix="streamtts-test-")  # short: a socket's path has 107 bytes at most
    path = os.path.join(folder, "edge.sock")
    cfg = edge.Config(redis_url=redis_url, redis_connect_attempts=3, forwarded_allow_ips=frozenset({"unix"}),
                      read_burst=int(LIMITED["EDGE_READ_BURST"]), read_rate=float(LIMITED["EDGE_READ_RATE"]))
    runner = web.AppRunner(edge.create_app(cfg))
    await runner.setup()
    port = free_port()
    await web.UnixSite(runner, path).start()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    proxy = TestServer(create_app(redis, Upstreams(path, path), proxy_limits()))
    await proxy.start_server()
    try:
        yield str(proxy.make_url("")).rstrip("/"), f"http://127.0.0.1:{port}"
    finally:
        await proxy.close()
        await runner.cleanup()
        shutil.rmtree(folder)  # aiohttp leaves the socket file behind


@pytest.mark.rule("up-reached-through-its-proxy")
async def test_a_direct_loopback_client_cannot_claim_an_address_and_the_proxys_clients_are_told_apart(
        edge_on_a_socket: tuple[str, str]) -> None:
    via_proxy, direct = edge_on_a_socket
    # From 127.0.0.1 straight to the port, each read claiming another address: all one client.
    assert [await read_from(direct, "127.0.0.1", f"198.51.100.{n}") for n in range(3)] == [404, 404, 429]
    # Through the proxy: 127.0.0.2 is itself whatever it claims, and 127.0.0.3 is another client.
    assert [await read_from(via_proxy, "127.0.0.2", "127.0.0.3") for _ in range(3)] == [404, 404, 429]
    assert await read_from(via_proxy, "127.0.0.3") == 404


@pytest.mark.rule("up-reached-through-its-proxy")
@pytest.mark.parametrize("binary", [shutil.which("redis-server"), embedded_binary()], ids=["redis", "embedded"])
def test_a_server_with_a_password_refuses_a_client_without_it(tmp_path: Path, binary: str | None) -> None:
    if binary is None:
        pytest.skip("this server is not installed here")
    server = start_server(tmp_path / "redis", aof=False, password="a-password-of-the-state-dir", binary=binary)
    try:
        assert unauthenticated_ping(server.port).startswith(b"-NOAUTH")
        with SyncRedis.from_url(server.url) as client:  # the URL the services get carries it
            assert client.ping()
        argv = Path(f"/proc/{server.process.pid}/cmdline").read_bytes()
        assert b"a-password-of-the-state-dir" not in argv  # `ps` shows every user the command line
    finally:
        server.stop()


def unauthenticated_ping(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"PING\r\n")
        return s.recv(64)


def named_children(pid: int) -> dict[str, int]:
    """``up``'s children by what they run: intake, edge, and the Redis server."""
    out = {}
    for child in descendants(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"-server" in argv[0]:
            out["redis"] = child
        elif len(argv) > 2 and argv[1] == b"-m":
            out[argv[2].decode()] = child
    return out


@pytest.mark.rule("up-reached-through-its-proxy")
@pytest.mark.timeout(120)
async def test_up_is_reached_only_through_its_proxy_and_its_redis_only_with_the_password(tmp_path: Path) -> None:
    port, wyoming_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"} | LIMITED
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamtts", "up", "--port", str(port), "--state-dir", str(tmp_path / "state"),
         "--only", "intake,edge", "--wyoming-port", str(wyoming_port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}/healthz", proc, "streamtts up", START_S)
        children = named_children(proc.pid)
        assert {"intake", "edge", "redis"} <= children.keys()
        await wait_until(lambda: all(listening(children[name])[1] for name in ("intake", "edge")), START_S)
        runtime = Path(next(iter(listening(children["edge"])[1]))).parent
        for name, tcp in (("intake", {wyoming_port}), ("edge", set())):  # Wyoming is for its clients, on --host
            ports, sockets = listening(children[name])
            assert ports == tcp, name
            (path,) = sockets
            assert Path(path).parent == runtime, name
            folder = runtime.stat()
            assert stat.S_IMODE(folder.st_mode) == 0o700 and folder.st_uid == os.getuid(), name

        origin = f"http://127.0.0.1:{port}"
        assert [await read_from(origin, "127.0.0.2", "127.0.0.3") for _ in range(3)] == [404, 404, 429]
        assert await read_from(origin, "127.0.0.3") == 404

        password = tmp_path / "state" / PASSWORD_FILE
        assert stat.S_IMODE(password.stat().st_mode) == 0o600
        (redis_port,) = listening(children["redis"])[0]
        assert unauthenticated_ping(redis_port).startswith(b"-NOAUTH")
        with SyncRedis(port=redis_port, password=password.read_text().strip()) as client:
            assert client.ping()
    finally:
        proc.terminate()
        assert proc.wait(60) == 0
    assert not runtime.exists()  # the run's sockets go with it
