"""The layout cache: each record's headers are read from Redis once, live casts included, and no
body travels for a layout (the HEADERS script sends sizes); snapshots never move."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from castlog import (
    Audio,
    CastStore,
    Eos,
    Error,
    Layout,
    LogReader,
    LogView,
    Record,
    Start,
    cast_key,
    playable,
    scripts,
    summarize,
)
from castlog.view import SCAN_BATCH, Chunk
from edge.context import EDGE
from edge.layout import LayoutCache
from tests.edge.edge_helpers import Cast, audio_records, cast_id, write_cast

BODY_BYTES = 30_000  # about a real sentence's MP3


@dataclass
class Reads:
    """What the XRANGEs of a Redis client brought back."""

    calls: int = 0
    rows: int = 0
    body_bytes: int = 0
    seqs: list[int] = field(default_factory=list)

    def count(self, rows: Any) -> None:
        self.calls += 1
        self.rows += len(rows)
        self.body_bytes += sum(len(f.get(b"b", b"")) for _, f in rows)
        self.seqs += [int(raw_id.split(b"-")[1]) - 1 for raw_id, _ in rows]


def counting(redis: Redis, reads: Reads) -> Any:
    """A replacement for ``redis.xrange`` that counts what it returns."""
    real = redis.xrange

    async def xrange(*args: Any, **kwargs: Any) -> Any:
        rows = await real(*args, **kwargs)
        reads.count(rows)
        return rows

    return xrange


HEADERS_SHA = hashlib.sha1(scripts.HEADERS.encode()).hexdigest()


def counting_headers(redis: Redis, reads: Reads) -> tuple[Any, Any]:
    """Replacements for ``redis.evalsha_ro`` and ``eval_ro`` that count the rows the HEADERS
    script returns (the other scripts, the marks, pass uncounted)."""
    real_sha, real_eval = redis.evalsha_ro, redis.eval_ro

    def count(reply: Any) -> Any:
        reads.count([(raw_id, dict(zip(flat[::2], flat[1::2]))) for raw_id, flat in reply])
        return reply

    async def evalsha_ro(sha: str, *args: Any) -> Any:
        reply = await real_sha(sha, *args)
        return count(reply) if sha == HEADERS_SHA else reply

    async def eval_ro(script: str, *args: Any) -> Any:
        reply = await real_eval(script, *args)
        return count(reply) if script == scripts.HEADERS else reply

    return evalsha_ro, eval_ro


def count_reads(monkeypatch: pytest.MonkeyPatch, redis: Redis, reads: Reads) -> None:
    """Count every row ``redis`` reads from a log: by XRANGE (bodies) or by HEADERS (sizes)."""
    monkeypatch.setattr(redis, "xrange", counting(redis, reads))
    evalsha_ro, eval_ro = counting_headers(redis, reads)
    monkeypatch.setattr(redis, "evalsha_ro", evalsha_ro)
    monkeypatch.setattr(redis, "eval_ro", eval_ro)


class CountingRedis:
    """A Redis client that only reads logs (XRANGE, HEADERS) and marks, its rows counted."""

    def __init__(self, redis: Redis) -> None:
        self.reads = Reads()
        self.xrange = counting(redis, self.reads)
        self.evalsha_ro, self.eval_ro = counting_headers(redis, self.reads)

    def as_redis(self) -> Redis:
        return cast(Redis, self)


async def expected_layout(store: CastStore, cid: str) -> tuple[list[Chunk], dict[str, Any]]:
    """The chunks and state of the whole log, computed here from castlog alone."""
    entries = await LogReader(store.redis).read(cid, 0, limit=10_000)
    chunks, start = [], 0
    for entry in playable(entries):
        assert isinstance(entry.record, Audio)
        chunks.append(Chunk(entry.seq_num, entry.record.i, len(entry.record.body), start))
        start += len(entry.record.body)
    return chunks, public_state(summarize(entries))


def public_state(state: Any) -> dict[str, Any]:
    return {k: getattr(state, k) for k in ("title", "voice", "chars", "planned", "status", "attempts",
                                            "resume_from", "error", "tail", "finished", "audio_ms")}


async def test_a_second_state_request_on_a_live_cast_reads_only_the_new_records(
    edge: TestClient[Any, Any], store: CastStore, monkeypatch: pytest.MonkeyPatch,
) -> None:
    cid = cast_id()
    live = await write_cast(store, cid, [f"S{i}." for i in range(40)], finish=False, body_bytes=BODY_BYTES)
    pool = edge.server.app[EDGE].redis
    reads = Reads()
    count_reads(monkeypatch, pool, reads)
    first = await (await edge.get(f"/api/casts/{cid}")).json()
    assert first["tail"] == live.tail and first["finished"] == 40
    assert reads.seqs == list(range(live.tail))  # the first request reads the whole log once
    assert reads.body_bytes == 0  # headers only: the bodies stay in Redis
    old_tail = live.tail
    more = audio_records(["S40.", "S41."], body_bytes=BODY_BYTES, start_i=40)
    await live.append(*more)
    reads.seqs.clear()
    reads.body_bytes = 0
    second = await (await edge.get(f"/api/casts/{cid}")).json()
    assert second["tail"] == live.tail and second["finished"] == 42 and second["status"] == "generating"
    assert reads.seqs == [old_tail, old_tail + 1]  # the new records only
    assert reads.body_bytes == 0
    reads.seqs.clear()
    third = await (await edge.get(f"/api/casts/{cid}")).json()
    assert third == second and reads.seqs == []  # nothing new: one empty XRANGE


async def test_a_finished_cast_is_served_from_memory(
    edge: TestClient[Any, Any], store: CastStore, monkeypatch: pytest.MonkeyPatch,
) -> None:
    cid = cast_id()
    await write_cast(store, cid, ["One.", "Two."])
    pool = edge.server.app[EDGE].redis
    reads = Reads()
    monkeypatch.setattr(pool, "xrange", counting(pool, reads))
    assert (await edge.get(f"/api/casts/{cid}")).status == 200
    calls = reads.calls
    assert (await edge.get(f"/api/casts/{cid}")).status == 200
    resp = await edge.get(f"/api/casts/{cid}/audio.mp3", headers={"Range": "bytes=0-0"})
    assert resp.status == 206 and len(await resp.read()) == 1
    assert reads.calls == calls + 1  # the range's body only, no scan


async def test_simultaneous_first_requests_share_one_scan(store: CastStore, redis: Redis) -> None:
    cid = cast_id()
    live = await write_cast(store, cid, [f"S{i}." for i in range(40)], finish=False, body_bytes=BODY_BYTES)
    counted = CountingRedis(redis)
    cache = LayoutCache(8, LogReader(counted.as_redis()))
    layouts = await asyncio.gather(*(cache.get(cid) for _ in range(20)))
    assert all(layout is layouts[0] for layout in layouts)
    assert layouts[0].tail == live.tail
    assert counted.reads.rows == live.tail
    assert counted.reads.body_bytes == 0
    assert counted.reads.calls == live.tail // SCAN_BATCH + 1  # one pass, in batches


async def test_simultaneous_requests_on_a_cached_live_cast_share_one_read(store: CastStore, redis: Redis) -> None:
    cid = cast_id()
    live = await write_cast(store, cid, ["S0."], finish=False, body_bytes=BODY_BYTES)
    counted = CountingRedis(redis)
    cache = LayoutCache(8, LogReader(counted.as_redis()))
    await cache.get(cid)
    await live.append(*audio_records(["S1.", "S2."], body_bytes=BODY_BYTES, start_i=1))
    counted.reads = Reads()
    counted.xrange = counting(redis, counted.reads)
    counted.evalsha_ro, counted.eval_ro = counting_headers(redis, counted.reads)
    layouts = await asyncio.gather(*(cache.get(cid) for _ in range(10)))
    assert {layout.tail for layout in layouts} == {live.tail}
    assert counted.reads.rows == 2 and counted.reads.body_bytes == 0


ATTEMPTS: list[Record] = [
    Start(attempt=1, resume_from=0, at=0),
    *audio_records(["a0", "a1", "a2", "a3"], body_bytes=11),
    Error(reason="worker lost", attempts=1),
    Start(attempt=2, resume_from=2, at=0),
    *audio_records(["b2", "b3", "b4"], body_bytes=23, start_i=2),
    Start(attempt=3, resume_from=1, at=0),  # rewrites from 1: drops b2..b4 and a1..a3 of before
    *audio_records(["c1", "c2"], body_bytes=37, start_i=1),
    Error(reason="worker lost", attempts=3),
    Start(attempt=4, resume_from=3, at=0),
    *audio_records(["d3", "d4", "d5"], body_bytes=41, start_i=3),
    Eos(sentences=6, audio_ms=1, attempts=4),
]


@pytest.mark.parametrize("step", [1, 2, 5])
async def test_the_layout_extended_across_attempts_equals_a_full_scan(store: CastStore, redis: Redis, step: int) -> None:
    cid = cast_id(step)
    live = Cast(store, cid)
    await live.submit(6)
    reader = LogReader(redis)
    cache = LayoutCache(4, reader)
    seen: list[tuple[Layout, tuple[Chunk, ...], dict[str, Any]]] = []
    for k in range(0, len(ATTEMPTS), step):
        await live.append(*ATTEMPTS[k : k + step])
        layout = await cache.get(cid)
        chunks, state = await expected_layout(store, cid)
        assert list(layout.chunks) == chunks
        assert public_state(layout.state) == state
        fresh = await LogView(reader, cid).refresh()
        assert fresh.chunks == layout.chunks and public_state(fresh.state) == state
        assert (layout.closed, layout.finished) == (fresh.closed, fresh.finished)
        seen.append((layout, layout.chunks, public_state(layout.state)))
    assert [c.i for c in seen[-1][0].chunks] == [0, 1, 2, 3, 4, 5]
    assert seen[-1][0].finished
    # every snapshot handed out earlier is as it was when handed out
    for layout, chunks, state in seen:
        assert layout.chunks == chunks and public_state(layout.state) == state


async def test_the_cache_stays_bounded_and_drops_the_least_recently_used(store: CastStore, redis: Redis) -> None:
    cache = LayoutCache(3, LogReader(redis))
    ids = [cast_id(f"bounded {n}") for n in range(5)]
    for n, cid in enumerate(ids):
        await write_cast(store, cid, ["One.", "Two."], finish=n % 2 == 0)  # live and finished alike
    for cid in ids[:3]:
        await cache.get(cid)
    await cache.get(ids[0])  # used again: now the most recent
    await cache.get(ids[3])
    await cache.get(ids[4])
    assert len(cache) == 3
    assert [cid in cache for cid in ids] == [True, False, False, True, True]


async def test_a_cast_without_a_log_is_not_cached(store: CastStore, redis: Redis) -> None:
    cache = LayoutCache(3, LogReader(redis))
    kept = cast_id("kept")
    await write_cast(store, kept, ["One."], finish=False)
    await cache.get(kept)
    missing = cast_id("never submitted")
    layouts = await asyncio.gather(*(cache.get(missing) for _ in range(3)))
    assert {layout.tail for layout in layouts} == {0}
    assert missing not in cache and kept in cache and len(cache) == 1
    assert await redis.exists(cast_key(missing)) == 0
