"""Bodies leave Redis once: what Redis sends (INFO stats ``total_net_output_bytes``) for many
readers of one cast, as a multiple of the log's own bytes. Bytes are deterministic, so the bounds
are asserted (times never are). Before #22: 50 late joiners cost 58.5x the log, 20 status
reads 1.03x (layouts read every body to keep its size)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from castlog import CastStore, Eos, cast_key
from tests.edge.edge_helpers import audio_records, cast_id, read_events, write_cast

BODY_BYTES = 30_000  # about a real sentence's MP3
JOINERS, STATUS_READS = 50, 20


async def sent_by_redis(redis: Redis) -> int:
    return int((await redis.info("stats"))["total_net_output_bytes"])


async def log_bytes(redis: Redis, cid: str) -> int:
    """The log's bytes as XRANGE sends them: ids, field names and values."""
    return sum(len(raw_id) + sum(len(k) + len(v) for k, v in fields.items())
               for raw_id, fields in await redis.xrange(cast_key(cid)))


@pytest.mark.rule("bodies-travel-once")
async def test_fifty_late_joiners_of_a_cast_being_made_cost_redis_about_one_log(
    edge: TestClient[Any, Any], store: CastStore, redis: Redis,
) -> None:
    cid = cast_id()
    cast = await write_cast(store, cid, [f"S{i}." for i in range(40)], finish=False, body_bytes=BODY_BYTES)
    before = await sent_by_redis(redis)
    joiners = [asyncio.create_task(read_events(await edge.get(f"/api/casts/{cid}/events"))) for _ in range(JOINERS)]
    more = audio_records([f"S{i}." for i in range(40, 60)], body_bytes=BODY_BYTES, start_i=40)
    for record in more:  # the cast goes on while they catch up
        await cast.append(record)
        await asyncio.sleep(0.005)
    await cast.append(Eos(sentences=60, audio_ms=60 * 300, attempts=1))
    heard = await asyncio.gather(*joiners)
    sent = await sent_by_redis(redis) - before
    assert all(len([e for e in events if e.event == "audio"]) == 60 for events in heard)
    ratio = sent / await log_bytes(redis, cid)
    assert ratio <= 1.5, f"Redis sent {ratio:.2f}x the log for {JOINERS} late joiners"


@pytest.mark.rule("bodies-travel-once")
async def test_status_reads_send_no_bodies(edge: TestClient[Any, Any], store: CastStore, redis: Redis) -> None:
    cid = cast_id()
    cast = await write_cast(store, cid, [f"S{i}." for i in range(40)], finish=False, body_bytes=BODY_BYTES)
    before = await sent_by_redis(redis)
    for k in range(STATUS_READS):
        if k == STATUS_READS // 2:
            await cast.append(*audio_records(["S40.", "S41."], body_bytes=BODY_BYTES, start_i=40))
        assert (await edge.get(f"/api/casts/{cid}")).status == 200
    assert (await edge.get(f"/api/casts/{cid}/captions")).status == 200
    sent = await sent_by_redis(redis) - before
    ratio = sent / await log_bytes(redis, cid)
    assert ratio <= 0.05, f"Redis sent {ratio:.3f}x the log for {STATUS_READS} status reads"

