"""Casts as read-only durable streams, through the proxy to edge, on casts written with real MP3
chunks (the real model's end-to-end test is test_clients.py)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import ClientSession
from redis.asyncio import Redis

from castlog import CastStore, Eos, Start
from durablestreams.streams import offset_of
from tests.durable.conftest import serving_origin
from tests.edge.edge_helpers import audio_records, cast_id, write_cast

pytestmark = pytest.mark.rule("ds-casts")

@pytest.fixture
async def origin(redis: Redis, redis_url: str) -> AsyncIterator[str]:
    # one chunk per read, so that every chunk boundary is an offset a client is given
    async with serving_origin(redis, redis_url, edge_changes={"ds_read_max_bytes": 1}) as base:
        yield base


async def _mp3(http: ClientSession, base: str, cid: str) -> bytes:
    async with http.get(f"{base}/api/casts/{cid}/audio.mp3") as response:
        assert response.status == 200
        return await response.read()


async def _follow(http: ClientSession, url: str, offset: str = "-1") -> tuple[bytes, list[str]]:
    """Catch-up reads from ``offset`` to the EOF: the bytes, and every offset handed out."""
    got, offsets = b"", []
    while True:
        async with http.get(url, params={"offset": offset}) as response:
            assert response.status == 200
            got += await response.read()
            offset = response.headers["Stream-Next-Offset"]
            offsets.append(offset)
            if response.headers.get("Stream-Closed") == "true":
                return got, offsets


async def test_a_finished_cast_reads_as_its_mp3_and_resumes_exactly_from_any_offset(
    store: CastStore, origin: str
) -> None:
    cid = cast_id("ds finished")
    await write_cast(store, cid, ["One.", "Two.", "Three."])
    url = f"{origin}/v1/stream/casts/{cid}"
    async with ClientSession() as http:
        mp3 = await _mp3(http, origin, cid)
        async with http.head(url) as head:
            assert head.status == 200
            assert head.headers["Content-Type"] == "audio/mpeg"
            assert head.headers["Stream-Closed"] == "true"
            assert head.headers["Stream-Next-Offset"] == offset_of(f"0-{len(mp3)}")
        whole, offsets = await _follow(http, url)
        assert whole == mp3
        assert len(offsets) == 3 and offsets == sorted(offsets)  # a chunk per read
        for offset in offsets:
            position = int(offset.split("_")[1])
            assert (await _follow(http, url, offset))[0] == mp3[position:]
        middle = len(mp3) // 2 + 7  # any byte position, not only a chunk's start
        assert (await _follow(http, url, offset_of(f"0-{middle}")))[0] == mp3[middle:]


async def test_a_live_cast_long_polls_and_streams_sse_to_its_end(store: CastStore, origin: str) -> None:
    cid = cast_id("ds live")
    cast = await write_cast(store, cid, ["First."], finish=False)
    url = f"{origin}/v1/stream/casts/{cid}"
    async with ClientSession() as http:
        _, offsets = await _catch_up_to_tail(http, url)
        poll = asyncio.create_task(http.get(url, params={"offset": offsets[-1], "live": "long-poll"}))
        sse = asyncio.create_task(_sse_bytes(http, url))
        await asyncio.sleep(0.3)
        more = audio_records(["Second."], start_i=1, start_o=1000)
        await cast.append(*more)
        async with await poll as response:
            assert response.status == 200
            assert await response.read() == more[0].body
        await cast.append(Eos(sentences=2, audio_ms=2000, attempts=1))
        streamed, closed = await asyncio.wait_for(sse, 20)
        assert closed
        assert streamed == await _mp3(http, origin, cid)
        async with http.get(url, params={"offset": "now", "live": "long-poll"}) as response:
            assert response.status == 204  # closed: no waiting
            assert response.headers["Stream-Closed"] == "true"


async def _catch_up_to_tail(http: ClientSession, url: str) -> tuple[bytes, list[str]]:
    got, offsets, offset = b"", [], "-1"
    while True:
        async with http.get(url, params={"offset": offset}) as response:
            got += await response.read()
            offset = response.headers["Stream-Next-Offset"]
            offsets.append(offset)
            if response.headers.get("Stream-Up-To-Date") == "true":
                return got, offsets


async def _sse_bytes(http: ClientSession, url: str) -> tuple[bytes, bool]:
    """Base64 data events decoded, until a control event says the stream closed."""
    async with http.get(url, params={"offset": "-1", "live": "sse"}) as response:
        assert response.headers["Stream-SSE-Data-Encoding"] == "base64"
        got, buffer = b"", ""
        async for line in response.content:
            buffer += line.decode()
            if not buffer.endswith("\n\n"):
                continue
            event, _, data = buffer.partition("\n")
            buffer = ""
            payload = "".join(x[5:] for x in data.splitlines() if x.startswith("data:"))
            if event == "event: data":
                got += base64.b64decode(payload)
            elif json.loads(payload).get("streamClosed"):
                return got, True
    return got, False


async def test_records_read_as_a_json_stream_without_bodies(store: CastStore, origin: str) -> None:
    cid = cast_id("ds records")
    await write_cast(store, cid, ["One.", "Two."])
    async with ClientSession() as http, http.get(f"{origin}/v1/stream/casts/{cid}/records") as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json"
        assert response.headers["Stream-Closed"] == "true"
        records = await response.json()
    assert [r["kind"] for r in records] == ["meta", "start", "audio", "audio", "eos"]
    assert [r["seq_num"] for r in records] == [0, 1, 2, 3, 4]
    assert all("body" not in r for r in records)
    assert records[2]["headers"]["t"] == "One."


async def test_a_rewritten_tail_resumes_with_the_new_bytes(store: CastStore, origin: str) -> None:
    cid = cast_id("ds rewritten")
    cast = await write_cast(store, cid, ["One.", "Two."], finish=False)
    url = f"{origin}/v1/stream/casts/{cid}"
    async with ClientSession() as http:
        _, offsets = await _catch_up_to_tail(http, url)
        after_first = offsets[0]
        # a second attempt rewrites sentence 1 (other bytes) and finishes
        await cast.append(Start(attempt=2, resume_from=1, at=0), *audio_records(["Two!"], start_i=1, ms=500),
                          Eos(sentences=2, audio_ms=800, attempts=2))
        mp3 = await _mp3(http, origin, cid)
        rest, _ = await _follow(http, url, after_first)
        assert rest == mp3[int(after_first.split("_")[1]):]


@pytest.mark.rule("ds-casts-read-only")
async def test_writes_to_casts_are_refused(store: CastStore, origin: str, redis: Redis) -> None:
    cid = cast_id("ds refused")
    await write_cast(store, cid, ["One."])
    async with ClientSession() as http:
        for method in ("PUT", "POST", "DELETE"):
            for path in (cid, f"{cid}/records", "anything"):
                async with http.request(method, f"{origin}/v1/stream/casts/{path}", data=b"x",
                                        headers={"Content-Type": "audio/mpeg"}) as response:
                    assert response.status == 405, (method, path)
    assert await redis.keys("ds/*") == []


async def test_an_unknown_cast_is_404(origin: str) -> None:
    async with ClientSession() as http, http.get(f"{origin}/v1/stream/casts/{cast_id('nothing')}") as response:
        assert response.status == 404
        assert response.headers["X-Content-Type-Options"] == "nosniff"

