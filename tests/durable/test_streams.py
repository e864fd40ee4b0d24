"""The general /v1/stream namespace beyond the conformance suite: keys for writes, refusals that
leave nothing in Redis, lapsed streams whose keys go, forks that keep a deleted source alive
until the last one goes, offsets that sort like the entry ids they encode."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis
from yarl import URL

import edge
import intake
from castlog import CastStore, Start
from castlog.keys import id_order
from durablestreams import protocol
from durablestreams.keys import meta_key
from durablestreams.streams import MAX_FORK_DEPTH, DurableStreams, Spec, entry_of, offset_of
from edge.app import TAIL_CLIENT_NAME
from edge.context import EDGE
from servicekit import sse
from tests.durable.conftest import UNLIMITED, serving_origin
from tests.edge.edge_helpers import Cast, audio_records, calls_between, cast_id, command_calls, read_events
from tests.support.waiting import wait_until


@pytest.mark.rule("ds-write-keys", "ds-read-keys")
async def test_writes_and_reads_need_a_key_when_keys_are_set(redis: Redis, redis_url: str) -> None:
    keys = {"api_keys": frozenset({"k1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})}
    async with serving_origin(redis, redis_url, intake_changes=keys, edge_changes=keys) as base, \
            ClientSession() as http:
        url = f"{base}/v1/stream/keyed"
        async with http.put(url, headers={"Content-Type": "text/plain"}) as response:
            assert response.status == 401
        assert await redis.keys("ds/*") == []
        async with http.put(url, headers={"Content-Type": "text/plain",
                                            "Authorization": "Bearer k1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
                            data=b"hello") as response:
            assert response.status == 201
        async with http.post(url, headers={"Content-Type": "text/plain"}, data=b"more") as response:
            assert response.status == 401
        async with http.get(url) as response:
            assert response.status == 401
        async with http.get(url, headers={"Authorization": "Bearer k1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) as response:
            assert response.status == 200
            assert await response.read() == b"hello"


@pytest.mark.rule("ds-bounded")
async def test_bad_names_and_bodies_are_refused_and_leave_no_key(origin: str, redis: Redis) -> None:
    async with ClientSession() as http:
        # (dot segments never reach a handler: HTTP resolves a/../b to b first)
        for name in ("a//b", "x" * 257, "sp%20ace", "%00", "a/"):
            url = URL(f"{origin}/v1/stream/{name}", encoded=True)
            async with http.put(url, headers={"Content-Type": "text/plain"}) as response:
                assert response.status in (400, 404), name
        async with http.put(f"{origin}/v1/stream/j", headers={"Content-Type": "application/json"},
                            data=b"{nope") as response:
            assert response.status == 400
        async with http.put(f"{origin}/v1/stream/j", headers={"Content-Type": "application/json"},
                            data=b"[" * 100_000) as response:  # deeper than json's recursion
            assert response.status == 400
            assert (await response.json())["error"]["code"] == "bad_request"
        async with http.put(f"{origin}/v1/stream/big", headers={"Content-Type": "text/plain"},
                            data=io.BytesIO(b"x" * (1024 * 1024 + 1))) as response:
            assert response.status == 413
        for headers in ({"Stream-TTL": "+5"}, {"Stream-TTL": "9" * 30}, {"Stream-TTL": "9" * 5000},
                        {"Stream-Expires-At": "0001-01-01T00:00:00+01:00"},
                        {"Stream-Forked-From": "/v1/stream/j", "Stream-Fork-Sub-Offset": "9" * 5000}):
            async with http.put(f"{origin}/v1/stream/t", headers=headers) as response:
                assert response.status == 400, headers
                assert (await response.json())["error"]["code"] == "bad_request"
        async with http.put(f"{origin}/v1/stream/s", headers={"Content-Type": "text/plain"}) as response:
            assert response.status == 201
        for headers in ({"Producer-Id": "p" * 257, "Producer-Epoch": "0", "Producer-Seq": "0"},
                        {"Producer-Id": "p", "Producer-Epoch": "9" * 5000, "Producer-Seq": "0"},
                        {"Stream-Seq": "s" * 257}):
            async with http.post(f"{origin}/v1/stream/s", headers={"Content-Type": "text/plain", **headers},
                                 data=b"x") as response:
                assert response.status == 400, headers
                assert (await response.json())["error"]["code"] == "bad_request"
    assert sorted(await redis.keys("ds/*")) == [meta_key("s").encode()]  # no log, no producer


@pytest.mark.rule("ds-cursor")
async def test_a_cursor_no_server_sent_counts_as_none(origin: str) -> None:
    async with ClientSession() as http:
        url = f"{origin}/v1/stream/c"
        async with http.put(url, headers={"Content-Type": "text/plain"}, data=b"x") as response:
            assert response.status == 201
        clock = protocol.cursor_after(None)
        for cursor in ("9" * 5000, "\u00b2", "1" * 16):
            async with http.get(url, params={"offset": "-1", "cursor": cursor}) as response:
                assert response.status == 200, cursor
                assert int(response.headers["Stream-Cursor"]) - int(clock) in (0, 1), cursor


@pytest.mark.rule("cross-site-refused", "ds-cors-casts-only")
async def test_a_cross_site_page_can_neither_write_nor_read_a_stream(origin: str, redis: Redis) -> None:
    async with ClientSession() as http:
        url = f"{origin}/v1/stream/x"
        evil = {"Origin": "https://evil.example", "Content-Type": "text/plain"}
        for method in ("PUT", "POST", "DELETE"):
            async with http.request(method, url, headers=evil, data=b"hi") as response:
                assert response.status == 403, method
                assert (await response.json())["error"]["code"] == "cross_site"
        assert await redis.keys("ds/*") == []
        async with http.put(url, headers={"Content-Type": "text/plain"}, data=b"hi") as response:
            assert response.status == 201
        # answered (no browser is asked), but with no Access-Control-Allow-Origin: a page of another
        # site never sees it; the casts' streams, public by their links, carry one
        for path in ("x", "casts/AAAAAAAAAAAA"):
            for method in ("GET", "HEAD", "OPTIONS"):
                async with http.request(method, f"{origin}/v1/stream/{path}",
                                        headers={"Origin": "https://evil.example"}) as response:
                    allowed = response.headers.get("Access-Control-Allow-Origin")
                    assert allowed == (None if path == "x" else "*"), (path, method)


@pytest.mark.rule("ds-catch-up")
async def test_an_offset_past_the_tail_is_refused(origin: str) -> None:
    async with ClientSession() as http:
        url = f"{origin}/v1/stream/short"
        async with http.put(url, headers={"Content-Type": "text/plain"}, data=b"x") as response:
            tail = response.headers["Stream-Next-Offset"]
        async with http.get(url, params={"offset": tail}) as response:  # at the tail: nothing more, 200
            assert response.status == 200 and await response.read() == b""
        beyond = offset_of(f"{id_order(entry_of(tail) or '')[0] + 1}-0")
        for live in ({}, {"live": "long-poll"}, {"live": "sse"}):
            async with http.get(url, params={"offset": beyond, **live}) as response:
                assert response.status == 400, live
                assert "past the stream's tail" in (await response.json())["message"]


@pytest.mark.rule("ds-bounded")
async def test_a_body_too_large_or_too_slow_is_a_json_refusal(redis: Redis, redis_url: str) -> None:
    async def trickle() -> AsyncIterator[bytes]:
        yield b"x"
        await asyncio.sleep(3)  # past INTAKE_BODY_TIMEOUT_S below
        yield b"y"

    # intake itself (the front proxy reads a body whole before it forwards it)
    server = TestServer(intake.create_app(intake.Config(redis_url=redis_url, redis_connect_attempts=3,
                                                        body_timeout_s=0.5)), host="127.0.0.1")
    await server.start_server()
    base = str(server.make_url("")).rstrip("/")
    async with ClientSession() as http:
        async with http.put(f"{base}/v1/stream/created", headers={"Content-Type": "text/plain"}) as response:
            assert response.status == 201
        for method, name in (("PUT", "slow"), ("POST", "created")):
            async with http.request(method, f"{base}/v1/stream/{name}", headers={"Content-Type": "text/plain"},
                                    data=io.BytesIO(b"x" * (1024 * 1024 + 1))) as response:
                assert response.status == 413, method
                assert (await response.json())["error"]["code"] == "body_too_large"
            async with http.request(method, f"{base}/v1/stream/{name}", headers={"Content-Type": "text/plain"},
                                    data=trickle()) as response:
                assert response.status == 408, method
                assert (await response.json())["error"]["code"] == "body_timeout"
    await server.close()
    assert sorted(await redis.keys("ds/*")) == [meta_key("created").encode()]  # no log: nothing was appended


@pytest.mark.rule("ds-expiry")
async def test_a_stream_past_its_expiry_is_gone_with_its_keys(origin: str, redis: Redis) -> None:
    async with ClientSession() as http:
        url = f"{origin}/v1/stream/expired"
        async with http.put(url, headers={"Stream-Expires-At": "2001-01-01T00:00:00Z"}, data=b"old") as response:
            assert response.status == 201
        async with http.get(url) as response:
            assert response.status == 404
    assert await redis.keys("ds/*") == []


@pytest.mark.rule("ds-fork", "ds-delete")
async def test_a_deleted_source_lives_on_for_its_fork_and_goes_with_it(origin: str, redis: Redis) -> None:
    async with ClientSession() as http:
        src, fork = f"{origin}/v1/stream/src", f"{origin}/v1/stream/fork"
        async with http.put(src, headers={"Content-Type": "text/plain"}, data=b"abc") as response:
            assert response.status == 201
        async with http.put(fork, headers={"Stream-Forked-From": "/v1/stream/src"},
                            skip_auto_headers=["Content-Type"]) as response:  # the fork takes the source's
            assert response.status == 201
        async with http.post(fork, headers={"Content-Type": "text/plain"}, data=b"def") as response:
            assert response.status == 204
        async with http.delete(src) as response:
            assert response.status == 204
        async with http.get(src) as response:
            assert response.status == 410
        async with http.get(fork) as response:
            assert await response.read() == b"abcdef"
        async with http.delete(fork) as response:
            assert response.status == 204
    # the fork lived in its source's family: its path's link to it went with it
    assert await redis.keys("ds/*") == []


@pytest.mark.rule("ds-fork", "ds-bounded")
async def test_a_chain_of_forks_is_bounded(origin: str, redis: Redis) -> None:
    async with ClientSession() as http:
        async with http.put(f"{origin}/v1/stream/f0", headers={"Content-Type": "text/plain"}, data=b"0") as response:
            assert response.status == 201
        for n in range(1, MAX_FORK_DEPTH + 1):
            async with http.put(f"{origin}/v1/stream/f{n}", headers={"Stream-Forked-From": f"/v1/stream/f{n - 1}"},
                                skip_auto_headers=["Content-Type"]) as response:
                assert response.status == 201, n
        async with http.get(f"{origin}/v1/stream/f{MAX_FORK_DEPTH}") as response:
            assert await response.read() == b"0"
        async with http.put(f"{origin}/v1/stream/deeper",
                            headers={"Stream-Forked-From": f"/v1/stream/f{MAX_FORK_DEPTH}"},
                            skip_auto_headers=["Content-Type"]) as response:
            assert response.status == 400
            assert (await response.json())["error"]["code"] == "bad_request"
    assert await redis.keys("ds/*deeper") == []
    assert int(await redis.hget(meta_key(f"f{MAX_FORK_DEPTH}", "f0"), "refs")) == 0


@pytest.mark.rule("ds-offsets")
@given(a=st.tuples(st.integers(0, 2**48), st.integers(0, 2**40)), b=st.tuples(st.integers(0, 2**48),
                                                                             st.integers(0, 2**40)))
def test_offsets_sort_as_strings_the_way_entry_ids_sort(a: tuple[int, int], b: tuple[int, int]) -> None:
    ida, idb = f"{a[0]}-{a[1]}", f"{b[0]}-{b[1]}"
    assert (offset_of(ida) < offset_of(idb)) == (id_order(ida) < id_order(idb))
    assert entry_of(offset_of(ida)) == ida
    assert entry_of("-1") is None and entry_of("now") is None and entry_of("1-2") is None


@pytest.mark.rule("ds-bounded")
async def test_a_stream_holds_a_bounded_number_of_bytes(redis: Redis, redis_url: str) -> None:
    async with serving_origin(redis, redis_url, intake_changes={"ds_max_stream_bytes": 10}) as base, \
            ClientSession() as http:
        url = f"{base}/v1/stream/small"
        async with http.put(url, headers={"Content-Type": "text/plain"}, data=b"x" * 11) as response:
            assert response.status == 413
        assert await redis.keys("ds/*") == []
        async with http.put(url, headers={"Content-Type": "text/plain"}, data=b"x" * 6) as response:
            assert response.status == 201
        async with http.post(url, headers={"Content-Type": "text/plain"}, data=b"y" * 5) as response:
            assert response.status == 413
        async with http.post(url, headers={"Content-Type": "text/plain"}, data=b"y" * 4) as response:
            assert response.status == 204
        async with http.get(url) as response:
            assert await response.read() == b"xxxxxxyyyy"


@pytest.mark.rule("ds-bounded")
async def test_reads_spend_the_clients_read_tokens(redis: Redis, redis_url: str) -> None:
    limited = {"read_rate": 0.001, "read_burst": 2}
    async with serving_origin(redis, redis_url, edge_changes=limited) as base, ClientSession() as http:
        url = f"{base}/v1/stream/limited"
        async with http.put(url, headers={"Content-Type": "text/plain"}, data=b"x") as response:
            assert response.status == 201
        statuses = []
        for _ in range(3):
            async with http.get(url) as response:
                statuses.append(response.status)
        assert statuses == [200, 200, 429]


@pytest.mark.rule("ds-one-upstream-read", "ds-long-poll")
async def test_many_long_polls_share_one_upstream_read(origin: str, redis: Redis) -> None:
    waiters, streams = 40, 4
    async with ClientSession() as http:
        urls = [f"{origin}/v1/stream/shared-{n % streams}" for n in range(waiters)]
        tails = {}
        for url in set(urls):
            async with http.put(url, headers={"Content-Type": "text/plain"}) as response:
                tails[url] = response.headers["Stream-Next-Offset"]
        before = await command_calls(redis)
        polls = [asyncio.create_task(http.get(url, params={"offset": tails[url], "live": "long-poll"}))
                 for url in urls]
        await wait_until(lambda: _blocked_on_edges_tail(redis), timeout_s=10)
        for url in set(urls):
            async with http.post(url, headers={"Content-Type": "text/plain"}, data=b"news") as response:
                assert response.status == 204
        for poll in polls:
            async with await poll as response:
                assert response.status == 200
                assert await response.read() == b"news"
        reads = calls_between(before, await command_calls(redis)).get("cmdstat_xread", 0)
    # one read for all of them, read again as each stream joined and after each append: not one each
    assert reads <= 3 * streams, reads


async def _blocked_on_edges_tail(redis: Redis) -> bool:
    return await _blocked_reads(redis) == [TAIL_CLIENT_NAME]


async def _blocked_reads(redis: Redis) -> list[str]:
    """The names of the connections blocked in an XREAD (CLIENT LIST's cmd=xread, flag b)."""
    return [c.get("name", "") for c in await redis.client_list() if c.get("cmd") == "xread" and "b" in c["flags"]]


@pytest.mark.rule("ds-one-upstream-read", "one-upstream-tail")
async def test_a_durable_long_poll_an_sse_read_and_a_cast_follow_share_edges_one_blocked_read(
    redis: Redis, redis_url: str, store: CastStore
) -> None:
    """#34: edge held a second blocked connection for the durable streams' waiters; now they wait
    on its one shared tail, beside the casts' listeners."""
    streams = DurableStreams(redis)
    made = await streams.create("beside/a-cast", Spec("text/plain"), [b"a"])
    assert made.meta is not None
    offset = made.meta.tail_offset
    cid = cast_id("beside a durable stream")
    cast = Cast(store, cid)
    await cast.submit(2)
    await cast.append(Start(attempt=1, resume_from=0, at=0))
    # a long wait: the polls are answered by the appends below, however slow the machine
    cfg = edge.Config(redis_url=redis_url, redis_connect_attempts=3, ds_long_poll_s=60, **UNLIMITED)
    server = TestServer(edge.create_app(cfg), host="127.0.0.1")
    await server.start_server()
    tail = server.app[EDGE].tail
    url = str(server.make_url("/v1/stream/beside/a-cast"))
    try:
        async with ClientSession() as http:
            poll = asyncio.ensure_future(http.get(url, params={"offset": offset, "live": "long-poll"}))
            sse = await http.get(url, params={"offset": offset, "live": "sse"})
            follow = await http.get(str(server.make_url(f"/api/casts/{cid}/events")))
            assert sse.status == follow.status == 200
            await wait_until(lambda: sum(map(len, tail.waiters.keys.values())) == 2 and cid in tail.watches)
            await wait_until(lambda: _blocked_on_edges_tail(redis))
            names = [c.get("name") for c in await redis.client_list()]
            assert names.count(TAIL_CLIENT_NAME) == 1 and "edge-durable-tail" not in names  # one tail connection
            assert (await streams.append("beside/a-cast", "text/plain", [b"b"])).status == "ok"
            await cast.append(*audio_records(["one"]))
            async with await poll as polled:
                assert polled.status == 200 and await polled.read() == b"b"
            durable_events = await read_events(sse, limit=3)  # the control event, then b's data and control
            assert [e.data for e in durable_events if e.event == "data"] == ["b"]
            cast_events = await read_events(follow, limit=3)  # meta, start, then the audio from the tail
            assert [e.event for e in cast_events] == ["meta", "start", "audio"]
            assert len(await _blocked_reads(redis)) <= 1
            sse.close()
            follow.close()
    finally:
        await server.close()


@pytest.mark.rule("ds-append", "ds-json")
async def test_stream_seq_compares_bytes_and_json_refuses_lone_surrogates(origin: str, redis: Redis) -> None:
    async with ClientSession() as http:
        url = f"{origin}/v1/stream/seq"
        async with http.put(url, headers={"Content-Type": "text/plain"}) as response:
            assert response.status == 201
        # byte order, not a locale's: "B" (0x42) sorts before "a" (0x61)
        for seq, status in (("B", 204), ("a", 204), ("Z", 409), ("a", 409), ("ab", 204)):
            async with http.post(url, headers={"Content-Type": "text/plain", "Stream-Seq": seq},
                                 data=b"x") as response:
                assert response.status == status, seq
        async with http.put(f"{origin}/v1/stream/surrogate", headers={"Content-Type": "application/json"},
                            data=b'["\\ud800"]') as response:
            assert response.status == 400
    assert not await redis.exists(meta_key("surrogate"))


@pytest.mark.rule("ds-sse")
async def test_a_stopping_edge_ends_its_sse_streams_at_once(redis: Redis, redis_url: str) -> None:
    edge_cfg = edge.Config(redis_url=redis_url, redis_connect_attempts=3, shutdown_timeout_s=60.0)
    server = TestServer(edge.create_app(edge_cfg), host="127.0.0.1")
    await server.start_server()
    await DurableStreams(redis).create("quiet", Spec("text/plain"), [b"hi"])
    async with ClientSession() as http:
        response = await http.get(server.make_url("/v1/stream/quiet"), params={"offset": "-1", "live": "sse"})
        assert {k: response.headers[k] for k in sse.HEADERS} == sse.HEADERS  # the one SSE header set
        first = await response.content.readuntil(b"\n\n")
        assert first.startswith(b"event: data")
        closing = asyncio.create_task(server.close())
        rest = await asyncio.wait_for(response.read(), 30)  # the stream ends; not after shutdown_timeout
        assert b"event: control" in rest
        await asyncio.wait_for(closing, 30)
