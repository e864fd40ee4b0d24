"""streamtts up's front proxy under a hostile client (#35 items 5, 6 and the low ones): served
as the launcher serves it (doorway.serve), over real sockets, the attacker on 127.0.0.2 bounded
while another client on 127.0.0.3 is still served. Every wait is on a state the proxy exposes
or on the socket itself, never a time."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import pytest
from aiohttp import ClientSession, TCPConnector, WSMsgType, web
from aiohttp.test_utils import TestServer
from redis.asyncio import Redis

from streamtts import doorway
from streamtts.config import Config
from streamtts.proxy import RELAY_HOLDS, RELAYS, SERVER_NAME, UPLOADS, Limits, Upstreams, create_app, runner
from streamtts.redisserver import free_port
from tests.support.proxylimits import proxy_limits
from tests.support.waiting import wait_until

ATTACKER, OTHER = "127.0.0.2", "127.0.0.3"
# Bounds small enough that a test reaches them at once; the defaults are in streamtts/config.py.
SETTINGS = dataclasses.replace(Config(), proxy_header_timeout_s=60.0, proxy_idle_s=60.0, proxy_write_timeout_s=60.0,
                               proxy_heartbeat_s=60.0)


@dataclasses.dataclass
class Door:
    port: int
    app: web.Application
    serving: doorway.Serving

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@asynccontextmanager
async def front_door(redis: Redis, upstream: web.Application, limits: Limits) -> AsyncIterator[Door]:
    """The proxy in front of ``upstream`` (as intake and edge both), served as `up` serves it."""
    server = TestServer(upstream, host="127.0.0.1")
    await server.start_server()
    base = f"http://127.0.0.1:{server.port}"
    app = create_app(redis, Upstreams(base, base), limits)
    app_runner = runner(app)
    await app_runner.setup()
    port = free_port()
    serving = await doorway.serve(app_runner, "127.0.0.1", port, limits.settings.proxy_header_timeout_s,
                                  limits.settings.proxy_connections_per_client)
    try:
        yield Door(port, app, serving)
    finally:
        await serving.close()
        await server.close()


def sse_upstream(piece: bytes = b"data: x\n\n", asked: list[str] | None = None) -> web.Application:
    """An event stream that never ends, written as fast as the reader takes it; ``asked`` gets one
    entry per stream asked for."""

    async def events(request: web.Request) -> web.StreamResponse:
        if asked is not None:
            asked.append(request.path)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        while True:
            await response.write(piece)
            await asyncio.sleep(0)

    async def echo(request: web.Request) -> web.Response:
        return web.json_response({name: request.headers.get(name) for name in ("X-Forwarded-Host", "X-Forwarded-Proto")})

    app = web.Application()
    app.router.add_get("/api/casts/{id}/events", events)
    app.router.add_route("*", "/{tail:.*}", echo)
    return app


async def served(door: Door, address: str = OTHER, path: str = "/c/x") -> int:
    """The status another client gets for a plain read through the door."""
    async with ClientSession(connector=TCPConnector(local_addr=(address, 0))) as http:
        async with http.get(door.url(path)) as response:
            await response.read()
            return response.status


async def opened(door: Door, address: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", door.port, local_addr=(address, 0))


async def answer_then_end(reader: asyncio.StreamReader) -> bytes:
    """What the proxy wrote before it closed the connection."""
    return await asyncio.wait_for(reader.read(), 30)


@pytest.mark.rule("front-door-bounded")
async def test_a_slow_loris_is_closed_with_408_while_another_client_is_served(redis: Redis) -> None:
    limits = proxy_limits(dataclasses.replace(SETTINGS, proxy_header_timeout_s=0.5))
    async with front_door(redis, sse_upstream(), limits) as door:
        loris = [await opened(door, ATTACKER) for _ in range(3)]
        for _, writer in loris:
            writer.write(b"GET /c/x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ")  # a head that never ends
        assert await served(door) == 200
        for reader, writer in loris:
            assert (await answer_then_end(reader)).startswith(b"HTTP/1.1 408")
            writer.close()
        await wait_until(lambda: not door.serving.door.connections.held)


@pytest.mark.rule("front-door-bounded")
async def test_an_idle_kept_alive_connection_is_closed(redis: Redis) -> None:
    limits = proxy_limits(dataclasses.replace(SETTINGS, proxy_idle_s=0.5))
    async with front_door(redis, sse_upstream(), limits) as door:
        reader, writer = await opened(door, ATTACKER)
        writer.write(b"GET /c/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert head.startswith(b"HTTP/1.1 200")
        await answer_then_end(reader)  # the body, then the close: it asked for nothing more
        writer.close()
        await wait_until(lambda: not door.serving.door.connections.held)
        assert await served(door) == 200


@pytest.mark.rule("front-door-bounded")
async def test_one_address_holds_at_most_its_share_of_connections(redis: Redis) -> None:
    limits = proxy_limits(dataclasses.replace(SETTINGS, proxy_connections_per_client=4))
    async with front_door(redis, sse_upstream(), limits) as door:
        held = [await opened(door, ATTACKER) for _ in range(4)]
        await wait_until(lambda: door.serving.door.connections.held.get(ATTACKER) == 4)
        reader, writer = await opened(door, ATTACKER)
        refused = await answer_then_end(reader)
        assert refused.startswith(b"HTTP/1.1 429") and b'"too_many_connections"' in refused
        writer.close()
        assert await served(door) == 200  # another address still gets in
        held.pop()[1].close()
        await wait_until(lambda: door.serving.door.connections.held.get(ATTACKER) == 3)
        assert await served(door, ATTACKER) == 200  # its share came back
        for _, writer in held:
            writer.close()


@pytest.mark.rule("front-door-bounded")
async def test_a_relay_whose_client_stops_reading_is_cut(redis: Redis) -> None:
    """#35 item 5: 16 relays of a never-read SSE stream pinned ~10 MiB of kernel memory each."""
    limits = proxy_limits(dataclasses.replace(SETTINGS, proxy_write_timeout_s=0.5))
    asked: list[str] = []
    async with front_door(redis, sse_upstream(b"data: " + b"x" * 65536 + b"\n\n", asked), limits) as door:
        stuck = []
        for _ in range(3):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.bind((ATTACKER, 0))
            sock.connect(("127.0.0.1", door.port))
            sock.sendall(b"GET /api/casts/AbCdEfGhIjKl/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            stuck.append(sock)  # and never read
        await wait_until(lambda: len(asked) == 3, 30)  # each relayed (and perhaps cut already)
        await wait_until(lambda: not door.app[RELAYS] and not door.app[RELAY_HOLDS].held, 30)
        async with ClientSession(connector=TCPConnector(local_addr=(OTHER, 0))) as http:
            async with http.get(door.url("/api/casts/AbCdEfGhIjKl/events")) as response:
                assert (await response.content.readuntil(b"\n\n")).startswith(b"data: x")
        for sock in stuck:  # reset, not closed: what the kernel held for it is dropped at once
            sock.settimeout(10)
            with pytest.raises(ConnectionResetError):
                while sock.recv(1 << 20):
                    pass
            sock.close()


@pytest.mark.rule("front-door-bounded")
async def test_one_address_relays_at_most_its_share(redis: Redis) -> None:
    limits = proxy_limits(dataclasses.replace(SETTINGS, proxy_relays_per_client=2))
    async with front_door(redis, sse_upstream(), limits) as door, \
            ClientSession(connector=TCPConnector(local_addr=(ATTACKER, 0))) as attacker:
        streams = [await attacker.get(door.url("/api/casts/AbCdEfGhIjKl/events")) for _ in range(2)]
        async with attacker.get(door.url("/api/casts/AbCdEfGhIjKl/events")) as refused:
            assert refused.status == 429 and (await refused.json())["error"] == "too_many_relays"
        assert await served(door) == 200
        for stream in streams:
            stream.close()
        await wait_until(lambda: not door.app[RELAY_HOLDS].held.get(ATTACKER))
        assert await served(door, ATTACKER) == 200


def socket_upstream(ended: asyncio.Event) -> web.Application:
    """A WebSocket that echoes text and sets ``ended`` when its client's socket ends."""

    async def live(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=16 * 1024 * 1024)
        await ws.prepare(request)
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    await ws.send_str(f"{len(msg.data)}")
        finally:
            ended.set()
        return ws

    app = web.Application()
    app.router.add_get("/v1/audio/speech/live", live)
    return app


async def echoes(door: Door, address: str = OTHER) -> str:
    async with ClientSession(connector=TCPConnector(local_addr=(address, 0))) as http:
        async with http.ws_connect(door.url("/v1/audio/speech/live")) as ws:
            await ws.send_str("hello")
            return await asyncio.wait_for(ws.receive_str(), 30)


@pytest.mark.rule("front-door-bounded")
async def test_a_websocket_message_past_intakes_limit_closes_that_socket_only(redis: Redis) -> None:
    """#35 item 6: 4 MiB messages were relayed (intake takes 64 KiB) and the proxy's RSS grew."""
    ended = asyncio.Event()
    async with front_door(redis, socket_upstream(ended), proxy_limits(SETTINGS)) as door, \
            ClientSession(connector=TCPConnector(local_addr=(ATTACKER, 0))) as attacker:
        async with attacker.ws_connect(door.url("/v1/audio/speech/live"), max_msg_size=0) as ws:
            await ws.send_str("x" * (60 * 1024))
            assert await ws.receive_str() == str(60 * 1024)  # under the limit (aiohttp's, as intake's): relayed
            with suppress(ConnectionError):  # the proxy may close before the whole message is sent
                await ws.send_str("x" * (4 * 1024 * 1024))
            msg = await asyncio.wait_for(ws.receive(), 30)
            assert msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSED, WSMsgType.ERROR), msg
            assert ws.close_code in (1009, 1006), ws.close_code  # message too big, or cut mid-send
        await asyncio.wait_for(ended.wait(), 30)  # and its session upstream ended with it
        assert await echoes(door) == "5"


@pytest.mark.rule("front-door-bounded")
async def test_a_dead_websocket_client_ends_its_session_upstream(redis: Redis) -> None:
    """#35 item 2: the proxy answered intake's pings itself, so a dead client held its session."""
    ended = asyncio.Event()
    limits = proxy_limits(dataclasses.replace(SETTINGS, proxy_heartbeat_s=0.5))
    async with front_door(redis, socket_upstream(ended), limits) as door, \
            ClientSession(connector=TCPConnector(local_addr=(ATTACKER, 0))) as attacker:
        ws = await attacker.ws_connect(door.url("/v1/audio/speech/live"), autoping=False)  # never answers a ping
        await asyncio.wait_for(ended.wait(), 30)
        assert await echoes(door) == "5"
        await ws.close()


async def test_the_proxy_names_itself_and_replaces_the_clients_forwarded_host_and_proto(redis: Redis) -> None:
    """#35 low: Server named aiohttp's version; a client's X-Forwarded-Host/-Proto reached the
    services, which build Location from them."""
    async with front_door(redis, sse_upstream(), proxy_limits(SETTINGS)) as door, \
            ClientSession(connector=TCPConnector(local_addr=(ATTACKER, 0))) as http:
        headers = {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"}
        async with http.get(door.url("/c/x"), headers=headers) as response:
            seen: dict[str, Any] = await response.json()
            assert response.headers["Server"] == SERVER_NAME
        assert seen == {"X-Forwarded-Host": f"127.0.0.1:{door.port}", "X-Forwarded-Proto": "http"}
        async with http.get(door.url("/healthz")) as response:
            assert response.headers["Server"] == SERVER_NAME


@pytest.mark.rule("front-door-bounded")
async def test_past_half_the_upload_slots_each_address_gets_one(redis: Redis) -> None:
    """#35 item 6: eight addresses trickling eight bodies each took all 64 upload slots."""
    limits = proxy_limits(dataclasses.replace(SETTINGS, uploads_per_client=8), max_buffered=8)
    async with front_door(redis, sse_upstream(), limits) as door:
        uploads = door.app[UPLOADS]
        head = b"POST /api/casts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        trickling, answers = [], []
        for address, bodies in ((ATTACKER, 8), ("127.0.0.4", 2), ("127.0.0.5", 1)):
            for _ in range(bodies):
                reader, writer = await opened(door, address)
                writer.write(head)  # 1 byte of 100, then nothing
                trickling.append(writer)
                answers.append(reader)
        # ATTACKER holds half the slots, 127.0.0.4 one of its two, 127.0.0.5 its one: 6 of 8
        await wait_until(lambda: uploads.held == {ATTACKER: 4, "127.0.0.4": 1, "127.0.0.5": 1})
        refused = [await asyncio.wait_for(reader.read(), 30) for reader in answers[4:8] + answers[9:10]]
        assert all(b" 429 " in r.split(b"\r\n")[0] and b'"too_many_uploads"' in r for r in refused)
        async with ClientSession(connector=TCPConnector(local_addr=(OTHER, 0))) as http:
            async with http.post(door.url("/api/casts"), json={"text": "Hi."}) as response:
                assert response.status == 200  # another address still gets a slot
        for writer in trickling:
            writer.close()
