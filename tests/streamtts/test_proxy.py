from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import AsyncIterator

import pytest
from aiohttp import ClientPayloadError, ClientSession, TCPConnector, WSMsgType, web
from aiohttp.test_utils import TestServer
from redis.asyncio import Redis

from streamtts import routes
from streamtts.config import Config
from streamtts.proxy import RELAYS, UPLOADS, Upstreams, create_app
from streamtts.redisserver import free_port
from tests.support.frontdoor import API_KEY, REFUSALS, Refused, answer, service_of
from tests.support.origin import running_origin
from tests.support.proxylimits import INTAKE, proxy_limits
from tests.support.routetable import front_door_cases
from tests.support.waiting import wait_until


def upstream(name: str, seen: list[tuple[str, str, str, str]]) -> web.Application:
    async def echo(request: web.Request) -> web.StreamResponse:
        seen.append((name, request.method, request.path_qs, request.headers.get("X-Forwarded-For", "")))
        if request.path.endswith("/events"):
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for n in range(3):
                await response.write(f"id: {n}\ndata: x\n\n".encode())
                await asyncio.sleep(0.3)
            return response
        body = await request.read()
        if request.path == "/generate" and request.content_type == "application/x-www-form-urlencoded":
            return web.Response(status=303, headers={"Location": "/c/pHanHO6047OT"})
        return web.json_response({"by": name, "body": body.decode()}, status=201 if request.method == "POST" else 200)

    app = web.Application(client_max_size=16 * INTAKE.max_body_bytes)
    app.router.add_route("*", "/{tail:.*}", echo)
    return app


@pytest.fixture
async def proxied(redis: Redis) -> AsyncIterator[tuple[str, list[tuple[str, str, str, str]]]]:
    seen: list[tuple[str, str, str, str]] = []
    intake, edge = TestServer(upstream("intake", seen)), TestServer(upstream("edge", seen))
    await intake.start_server()
    await edge.start_server()
    proxy = TestServer(create_app(redis, Upstreams(str(intake.make_url("")), str(edge.make_url(""))), proxy_limits()))
    await proxy.start_server()
    yield str(proxy.make_url("")), seen
    for server in (proxy, intake, edge):
        await server.close()


@pytest.mark.rule("one-route-table")
@pytest.mark.parametrize(("method", "path", "owner"), front_door_cases())
async def test_requests_reach_the_service_the_route_table_names(proxied, method: str, path: str, owner: str) -> None:
    """#34 item 8: POST /api/casts/<id>/cancel reached edge (404)."""
    base, seen = proxied
    async with ClientSession() as http:
        async with http.request(method, base.rstrip("/") + path + "?q=1", data=b"body") as response:
            status = response.status
    if owner == routes.HIDDEN:
        assert status == 404 and seen == []
        return
    assert seen[-1][:3] == (owner, method, path + "?q=1")
    assert seen[-1][3] == "127.0.0.1"  # the proxy tells the service who the client is


async def test_event_streams_pass_through_as_they_arrive(proxied) -> None:
    base, _ = proxied
    loop = asyncio.get_running_loop()
    async with ClientSession() as http:
        async with http.get(base.rstrip("/") + "/api/casts/pHanHO6047OT/events") as response:
            start = loop.time()
            first = await response.content.readuntil(b"\n\n")
            first_at = loop.time() - start
            rest = await response.read()
    assert first == b"id: 0\ndata: x\n\n"
    assert first_at < 0.25  # not held back until the upstream finished (0.6 s later)
    assert rest.count(b"id: ") == 2


async def test_health_answers_once_redis_does(proxied) -> None:
    base, _ = proxied
    async with ClientSession() as http:
        async with http.get(base.rstrip("/") + "/healthz") as response:
            assert response.status == 200


async def test_an_upstream_not_listening_yet_is_starting_and_one_that_went_away_is_a_502(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proxy = TestServer(create_app(redis, Upstreams(base, base), proxy_limits()))
    await proxy.start_server()
    try:
        async with ClientSession() as http:
            async with http.get(str(proxy.make_url("/x"))) as response:  # nothing listens there yet
                assert response.status == 503 and int(response.headers["Retry-After"]) > 0
                assert (await response.json())["error"] == "starting"
            runner = web.AppRunner(upstream("edge", []))
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            async with http.get(str(proxy.make_url("/x"))) as response:
                assert response.status == 200
            await runner.cleanup()
            with caplog.at_level(logging.WARNING, logger="streamtts.proxy"):
                for _ in range(3):
                    async with http.get(str(proxy.make_url("/x"))) as response:
                        assert response.status == 502
                        assert (await response.json())["error"] == "upstream_unavailable"
            assert len(caplog.records) == 1  # one warning while it stays down, not one per request
    finally:
        await proxy.close()


def streaming_forever(cut_after: int | None = None) -> web.Application:
    """An upstream whose event stream never ends (a live cast), or that dies after ``cut_after``
    events without finishing its response (a crashed edge)."""

    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        n = 0
        while cut_after is None or n < cut_after:
            await response.write(f"id: {n}\ndata: x\n\n".encode())
            n += 1
            await asyncio.sleep(0.05)
        assert request.transport is not None
        request.transport.abort()
        return response

    app = web.Application()
    app.router.add_get("/{tail:.*}", events)
    return app


async def test_stopping_the_proxy_ends_live_streams_instead_of_waiting_for_them(redis: Redis) -> None:
    upstream_server = TestServer(streaming_forever())
    await upstream_server.start_server()
    base = str(upstream_server.make_url(""))
    proxy = TestServer(create_app(redis, Upstreams(base, base), proxy_limits()))  # aiohttp's shutdown_timeout: 60 s
    await proxy.start_server()
    loop = asyncio.get_running_loop()
    try:
        async with ClientSession() as http:
            async with http.get(str(proxy.make_url("/api/casts/pHanHO6047OT/events"))) as response:
                assert await response.content.readuntil(b"\n\n") == b"id: 0\ndata: x\n\n"
                started = loop.time()
                await asyncio.wait_for(proxy.close(), 10)
                assert loop.time() - started < 2
                # Ended cleanly (a cut stream raises ClientPayloadError), on an event boundary.
                rest = await asyncio.wait_for(response.read(), 2)
        assert rest == b"" or rest.endswith(b"\n\n")
    finally:
        await proxy.close()
        await upstream_server.close()


async def test_an_upstream_dying_mid_stream_cuts_the_clients_stream_too(redis: Redis) -> None:
    upstream_server = TestServer(streaming_forever(cut_after=2))
    await upstream_server.start_server()
    base = str(upstream_server.make_url(""))
    proxy = TestServer(create_app(redis, Upstreams(base, base), proxy_limits()))
    await proxy.start_server()
    try:
        async with ClientSession() as http:
            async with http.get(str(proxy.make_url("/api/casts/pHanHO6047OT/events"))) as response:
                with pytest.raises(ClientPayloadError):  # not a clean end the client would trust
                    await asyncio.wait_for(response.read(), 5)
    finally:
        await proxy.close()
        await upstream_server.close()


async def test_an_oversized_body_is_a_json_413(proxied) -> None:
    base, seen = proxied
    async with ClientSession() as http:
        async with http.post(base.rstrip("/") + "/api/casts", data=io.BytesIO(b"x" * (INTAKE.max_body_bytes + 1))) as response:
            assert response.status == 413
            assert (await response.json())["error"] == "body_too_large"
    assert seen == []  # refused before it reached intake


async def test_the_body_limit_is_the_one_given_so_it_matches_intakes(redis: Redis) -> None:
    seen: list[tuple[str, str, str, str]] = []
    intake = TestServer(upstream("intake", seen))
    await intake.start_server()
    proxy = TestServer(create_app(redis, Upstreams(str(intake.make_url("")), str(intake.make_url(""))),
                                  proxy_limits(max_body_bytes=3 * INTAKE.max_body_bytes)))
    await proxy.start_server()
    try:
        async with ClientSession() as http:
            big = b"x" * (2 * INTAKE.max_body_bytes)  # over the default, under the limit given
            async with http.post(str(proxy.make_url("/api/casts")), data=io.BytesIO(big)) as response:
                assert response.status == 201
                assert len((await response.json())["body"]) == len(big)
            async with http.post(str(proxy.make_url("/api/casts")), data=io.BytesIO(b"x" * (3 * INTAKE.max_body_bytes + 1))) as response:
                assert response.status == 413
                assert str(3 * INTAKE.max_body_bytes) in (await response.json())["message"]
    finally:
        await proxy.close()
        await intake.close()


async def test_a_redirect_reaches_the_client_unfollowed(proxied) -> None:
    base, seen = proxied
    async with ClientSession() as http:
        async with http.post(base.rstrip("/") + "/generate", data={"text": "Hi."}, allow_redirects=False) as response:
            assert response.status == 303
            assert response.headers["Location"] == "/c/pHanHO6047OT"
    assert [s[0] for s in seen] == ["intake"]


def websocket_upstream() -> web.Application:
    """An upstream WebSocket that echoes text and binary, then closes with a code and a reason."""

    async def socket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(f"hello {request.headers.get('X-Forwarded-For', '')}")
        async for msg in ws:
            if msg.type == WSMsgType.TEXT and msg.data == "bye":
                await ws.close(code=4429, message=b'{"seq_num": 7}')
            elif msg.type == WSMsgType.TEXT:
                await ws.send_str(msg.data.upper())
            elif msg.type == WSMsgType.BINARY:
                await ws.send_bytes(msg.data[::-1])
        return ws

    app = web.Application()
    app.router.add_get("/v1/audio/speech/live", socket)
    return app


async def test_websockets_are_relayed_both_ways_with_the_closing_code_and_reason(redis: Redis) -> None:
    upstream_server = TestServer(websocket_upstream())
    await upstream_server.start_server()
    base = str(upstream_server.make_url(""))
    proxy = TestServer(create_app(redis, Upstreams(base, "http://127.0.0.1:9"), proxy_limits()))
    await proxy.start_server()
    try:
        async with ClientSession() as http:
            async with http.ws_connect(str(proxy.make_url("/v1/audio/speech/live"))) as ws:
                assert (await ws.receive_str()) == "hello 127.0.0.1"
                await ws.send_str("text")
                assert (await ws.receive_str()) == "TEXT"
                await ws.send_bytes(b"\x01\x02")
                assert (await ws.receive_bytes()) == b"\x02\x01"
                await ws.send_str("bye")
                msg = await asyncio.wait_for(ws.receive(), 5)
                assert msg.type == WSMsgType.CLOSE and (msg.data, msg.extra) == (4429, '{"seq_num": 7}')
    finally:
        await proxy.close()
        await upstream_server.close()


def ready_upstream(body: dict[str, object] | None, length: bytes = b"") -> web.Application:
    """An upstream whose /readyz answers ``body`` (503 when None), and whose /file answers a body
    of known length with range headers, as edge does for a finished MP3."""

    async def readyz(request: web.Request) -> web.Response:
        return web.json_response(body) if body is not None else web.json_response({"error": "x"}, status=503)

    async def file(request: web.Request) -> web.Response:
        return web.Response(body=length, status=206, headers={
            "Content-Type": "audio/mpeg", "Accept-Ranges": "bytes", "Content-Range": f"bytes 0-{len(length) - 1}/999"})

    app = web.Application()
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/file", file)
    return app


@pytest.mark.parametrize(
    ("intake_body", "edge_body", "waiting"),
    [
        ({"status": "ok", "voices": 5, "default": "jf_alpha"}, {"status": "ok"}, []),
        ({"status": "ok", "voices": None, "default": None}, {"status": "ok"}, ["a worker's voices (the model is loading)"]),
        (None, {"status": "ok"}, ["intake"]),
        ({"status": "ok", "voices": 5, "default": "jf_alpha"}, None, ["edge"]),
    ],
)
async def test_readyz_is_200_only_when_redis_intake_edge_and_the_voices_are(
    redis: Redis, intake_body: dict[str, object] | None, edge_body: dict[str, object] | None, waiting: list[str]
) -> None:
    intake, edge = TestServer(ready_upstream(intake_body)), TestServer(ready_upstream(edge_body))
    await intake.start_server()
    await edge.start_server()
    proxy = TestServer(create_app(redis, Upstreams(str(intake.make_url("")).rstrip("/"), str(edge.make_url("")).rstrip("/")),
                                  proxy_limits()))
    await proxy.start_server()
    try:
        async with ClientSession() as http:
            async with http.get(str(proxy.make_url("/readyz"))) as response:
                body = await response.json()
                if not waiting:
                    assert response.status == 200 and body == {"status": "ok", "voices": 5, "default": "jf_alpha"}
                else:
                    assert response.status == 503 and body["waiting_for"] == waiting
                    assert body["error"] == "not_ready" and int(response.headers["Retry-After"]) > 0
            async with http.get(str(proxy.make_url("/healthz"))) as response:
                assert response.status == 200  # liveness: the proxy itself answers
    finally:
        for server in (proxy, intake, edge):
            await server.close()


async def test_content_length_and_range_headers_pass_through(redis: Redis) -> None:
    edge = TestServer(ready_upstream(None, b"x" * 100))
    await edge.start_server()
    proxy = TestServer(create_app(redis, Upstreams("http://127.0.0.1:9", str(edge.make_url("")).rstrip("/")), proxy_limits()))
    await proxy.start_server()
    try:
        async with ClientSession() as http:
            async with http.get(str(proxy.make_url("/file"))) as response:
                assert response.status == 206 and await response.read() == b"x" * 100
                assert response.headers["Content-Length"] == "100"
                assert response.headers["Content-Range"] == "bytes 0-99/999"
                assert response.headers["Accept-Ranges"] == "bytes"
                assert "Transfer-Encoding" not in response.headers
    finally:
        await proxy.close()
        await edge.close()


async def test_a_client_leaving_mid_stream_is_no_error(redis: Redis, caplog: pytest.LogCaptureFixture) -> None:
    """A closed tab or a stopped player: no warning, no traceback, and the relay is given up."""
    edge = TestServer(streaming_forever())
    await edge.start_server()
    app = create_app(redis, Upstreams("http://127.0.0.1:9", str(edge.make_url("")).rstrip("/")), proxy_limits())
    proxy = TestServer(app)
    await proxy.start_server()
    try:
        with caplog.at_level(logging.DEBUG):
            for leave in ("close", "abort"):  # a FIN, or a reset
                reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
                writer.write(b"GET /api/casts/pHanHO6047OT/events HTTP/1.1\r\nHost: x\r\n\r\n")
                await reader.readuntil(b"data: x\n\n")
                assert len(app[RELAYS]) == 1
                writer.close() if leave == "close" else writer.transport.abort()
                await wait_until(lambda: not app[RELAYS], 5)
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info] == []
    finally:
        await proxy.close()
        await edge.close()


@pytest.mark.rule("cross-site-refused")
async def test_the_proxy_refuses_a_rebound_name_and_hands_the_host_on(redis: Redis) -> None:
    """Finding 6 of #21: a page on a name rebound to 127.0.0.1 reached the local origin; and
    intake, which compares a write's Origin with the origin asked for, needs the client's Host."""
    hosts_seen: list[str] = []

    async def echo_host(request: web.Request) -> web.Response:
        hosts_seen.append(request.headers.get("Host", ""))
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo_host)
    upstream_server = TestServer(app)
    await upstream_server.start_server()
    base = str(upstream_server.make_url(""))
    proxy = TestServer(create_app(redis, Upstreams(base, base), proxy_limits(), hosts=frozenset({"localhost"})))
    await proxy.start_server()
    try:
        async with ClientSession() as http:
            async with http.get(proxy.make_url("/api/voices"), headers={"Host": "evil.example:8080"}) as response:
                assert response.status == 403 and (await response.json())["error"] == "unknown_host"
            async with http.get(proxy.make_url("/healthz"), headers={"Host": "evil.example"}) as response:
                assert response.status == 200
            for host in (f"localhost:{proxy.port}", f"127.0.0.1:{proxy.port}"):
                async with http.get(proxy.make_url("/api/voices"), headers={"Host": host}) as response:
                    assert response.status == 200
        assert hosts_seen == [f"localhost:{proxy.port}", f"127.0.0.1:{proxy.port}"]
    finally:
        await proxy.close()
        await upstream_server.close()


@pytest.mark.rule("proxy-end-to-end")
async def test_the_proxy_drops_hop_by_hop_headers_keeps_repeats_and_bounds_buffered_bodies(redis: Redis) -> None:
    """#21 finding 8: the proxy collapsed repeated headers, passed on the ones Connection names,
    and buffered 1 MiB bodies without a bound on how many at once."""
    import socket

    seen: list[list[tuple[str, str]]] = []

    async def echo(request: web.Request) -> web.Response:
        seen.append(list(request.headers.items()))
        response = web.Response(text="ok")
        response.headers.add("Set-Cookie", "a=1")
        response.headers.add("Set-Cookie", "b=2")
        response.headers["Connection"] = "X-Upstream-Private"
        response.headers["X-Upstream-Private"] = "secret"
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    upstream_server = TestServer(app)
    await upstream_server.start_server()
    base = str(upstream_server.make_url(""))
    proxy = TestServer(create_app(redis, Upstreams(base, base), proxy_limits(max_buffered=1)))  # one body buffered at once
    await proxy.start_server()
    try:
        # raw HTTP: a client library would fold the repeated request headers itself
        request = (f"GET /c/x HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\nConnection: keep-alive, X-Hop\r\n"
                   "X-Hop: drop-me\r\nX-Tag: one\r\nX-Tag: two\r\n\r\n").encode()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(request)
        await writer.drain()
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).decode()
        writer.close()
        got = [(k.lower(), v) for k, v in seen[-1]]
        assert ("x-tag", "one") in got and ("x-tag", "two") in got
        assert not any(k == "x-hop" for k, _ in got)
        lines = head.lower().split("\r\n")
        assert "set-cookie: a=1" in lines and "set-cookie: b=2" in lines
        assert not any(line.startswith("x-upstream-private") for line in lines)

        slow = socket.create_connection(("127.0.0.1", proxy.port))
        slow.sendall(f"POST /api/casts HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\nContent-Type: application/json\r\n"
                     "Content-Length: 100\r\n\r\n{".encode())
        await wait_until(lambda: proxy.app[UPLOADS].count == 1)
        # another address: the one slot is taken (503 busy); the same one would be told 429
        async with ClientSession(connector=TCPConnector(local_addr=("127.0.0.3", 0))) as http:
            async with http.post(proxy.make_url("/api/casts"), json={"text": "Hi."}) as response:
                assert response.status == 503 and (await response.json())["error"] == "busy"
        slow.close()
    finally:
        await proxy.close()
        await upstream_server.close()


async def test_a_body_that_does_not_arrive_in_the_time_given_is_a_json_408(redis: Redis) -> None:
    """The proxy gives a body the time intake gives it (the launcher passes INTAKE_BODY_TIMEOUT_S),
    and frees its buffer slot for other uploads."""
    proxy = TestServer(create_app(redis, Upstreams("http://127.0.0.1:9", "http://127.0.0.1:9"),
                                  proxy_limits(max_buffered=1, body_timeout_s=0.3)))
    await proxy.start_server()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(f"POST /api/casts HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\nContent-Type: application/json\r\n"
                     "Content-Length: 100\r\n\r\n{".encode())  # 1 byte of 100, then nothing
        await writer.drain()
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).decode()
        length = int(next(line.split(":")[1] for line in head.lower().split("\r\n") if line.startswith("content-length")))
        body = await asyncio.wait_for(reader.readexactly(length), 10)
        writer.close()
        assert head.startswith("HTTP/1.1 408") and b'"body_timeout"' in body
        assert proxy.app[UPLOADS].count == 0 and not proxy.app[UPLOADS].held  # the slot is free again
    finally:
        await proxy.close()


@pytest.mark.rule("proxy-end-to-end")
async def test_one_client_holds_at_most_its_share_of_the_upload_slots(redis: Redis) -> None:
    """#21's leftover: the proxy's upload slots were shared by all clients, so one address with
    slow bodies took them all. Two clients told apart by their loopback source addresses."""
    import socket

    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"got": len(await request.read())})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    upstream_server = TestServer(app)
    await upstream_server.start_server()
    base = str(upstream_server.make_url(""))
    proxy = TestServer(create_app(redis, Upstreams(base, base), proxy_limits(Config(uploads_per_client=2), max_buffered=4)))
    await proxy.start_server()
    head = f"POST /api/casts HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\nContent-Type: application/json\r\n"
    slow = []
    try:
        for _ in range(2):  # 127.0.0.2 trickles two bodies: its share
            sock = socket.create_connection(("127.0.0.1", proxy.port), source_address=("127.0.0.2", 0))
            sock.sendall(f"{head}Content-Length: 100\r\n\r\n{{".encode())
            slow.append(sock)
        uploads = proxy.app[UPLOADS]
        await wait_until(lambda: uploads.held.get("127.0.0.2") == 2)

        async def post_from(address: str) -> tuple[int, dict[str, object]]:
            async with ClientSession(connector=TCPConnector(local_addr=(address, 0))) as http:
                async with http.post(proxy.make_url("/api/casts"), json={"text": "Hi."}) as response:
                    return response.status, await response.json()

        status, body = await post_from("127.0.0.2")  # a third from the same address: refused
        assert (status, body["error"]) == (429, "too_many_uploads")
        assert (await post_from("127.0.0.3"))[0] == 200  # the other address is served
        for sock in slow:
            sock.close()
        await wait_until(lambda: uploads.count == 0)
        assert (await post_from("127.0.0.2"))[0] == 200  # its slots came back
    finally:
        for sock in slow:
            sock.close()
        await proxy.close()
        await upstream_server.close()


@pytest.mark.rule("refusals-pass-through")
@pytest.mark.parametrize("refused", REFUSALS, ids=str)
async def test_a_refusal_reaches_the_client_as_the_service_answered_it(redis: Redis, redis_url: str,
                                                                       refused: Refused) -> None:
    """#33: every refused upgrade became the proxy's 502 "the service is starting or down"."""
    async with running_origin(redis, redis_url, api_keys=frozenset({API_KEY})) as origin, ClientSession() as http:
        direct = await answer(http, service_of(refused, origin.intake, origin.edge), refused)
        assert direct[0] == refused.status and direct[1] == "application/json"
        assert await answer(http, origin.url, refused) == direct
