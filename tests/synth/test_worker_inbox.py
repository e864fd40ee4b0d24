"""Where a worker's jobs come from (synth.inbox), against a real Redis consumer group."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

import castlog
from synth import jobs
from synth.inbox import Inbox

LEASE_MS = 300


async def _deliver(redis: Redis, consumer: str, count: int) -> list[str]:
    """Deliver the next ``count`` new jobs to ``consumer``; their entry ids."""
    return [entry_id for entry_id, _ in await jobs.read_new(redis, consumer, count, block_ms=1)]


@pytest.mark.rule("pending-taken-over")
async def test_take_over_reaches_a_dead_workers_jobs_behind_many_live_ones(redis: Redis) -> None:
    await jobs.ensure_group(redis)
    for n in range(30):
        await castlog.enqueue(redis, castlog.Job(id=f"cast{n:08d}", voice="af_heart", enqueued_at=1))
    live = await _deliver(redis, "live", 25)  # first in the pending list, their leases kept fresh
    dead = await _deliver(redis, "dead", 5)
    await asyncio.sleep(2 * LEASE_MS / 1000)
    await jobs.refresh(redis, "live", live)
    inbox = Inbox(redis, "heir", lease_ms=LEASE_MS, claim_every_s=0, poll_s=0.01)
    await inbox.open()
    # One free slot: each XAUTOCLAIM scans ten pending entries, all live ones here.
    taken = [d.entry_id for d in await inbox.take(1, set())]
    assert taken == dead[:1]
    owners = await jobs.pending(redis, live + dead)
    assert {owners[i].consumer for i in live} == {"live"}
    assert owners[dead[0]].consumer == "heir" and owners[dead[1]].consumer == "dead"
