"""Where a worker's jobs come from (synth.inbox), against a real Redis consumer group."""

from __future__ import annotations

import asyncio

import pytest
from jobstreams import enqueue
from redis.asyncio import Redis

import castlog
from castlog.groups import ensure_group
from synth import jobs
from synth.inbox import Inbox, Turns

LEASE_MS = 300


async def _deliver(redis: Redis, consumer: str, count: int) -> list[str]:
    """Deliver the next ``count`` new jobs to ``consumer``; their entry ids."""
    reader = castlog.Consumer(redis, castlog.GROUP, consumer, castlog.JOBS, lease_ms=LEASE_MS)
    return [entry.id for entry in await reader.new(count, block_ms=1)]


@pytest.mark.rule("pending-taken-over")
async def test_take_over_reaches_a_dead_workers_jobs_behind_many_live_ones(redis: Redis) -> None:
    await ensure_group(redis, castlog.JOBS, castlog.GROUP)
    for n in range(30):
        await enqueue(redis, castlog.streams.Job(id=f"cast{n:08d}", voice="af_heart", enqueued_at=1))
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


@pytest.mark.rule("fair-queues")
async def test_new_jobs_are_taken_in_turn_by_client_not_first_come(redis: Redis) -> None:
    await ensure_group(redis, castlog.JOBS, castlog.GROUP)
    burst = [await enqueue(redis, castlog.streams.Job(id=f"a{n:011d}", voice="af_heart", client="192.0.2.1"))
             for n in range(96)]
    other = await enqueue(redis, castlog.streams.Job(id=f"b{0:011d}", voice="af_heart", client="192.0.2.2"))
    inbox = Inbox(redis, "w1", lease_ms=LEASE_MS, claim_every_s=60, poll_s=0.01)
    await inbox.open()
    taken = [d.entry_id for _ in range(4) for d in await inbox.take(1, set())]
    # B's one job comes after at most one of A's, and A's own keep their order.
    assert taken == [burst[0], other, burst[1], burst[2]]
    # The rest of A's read-ahead is held (pending to this worker, its lease refreshed).
    assert set(inbox.held()) == set(burst[3:])
    owners = await jobs.pending(redis, burst)
    assert {owners[i].consumer for i in burst} == {"w1"}


async def test_a_waiting_job_taken_over_elsewhere_is_forgotten(redis: Redis) -> None:
    await ensure_group(redis, castlog.JOBS, castlog.GROUP)
    ids = [await enqueue(redis, castlog.streams.Job(id=f"a{n:011d}", voice="af_heart", client=c))
           for n, c in enumerate(["x", "x", "y"])]
    inbox = Inbox(redis, "w1", lease_ms=LEASE_MS, claim_every_s=60, poll_s=0.01)
    await inbox.open()
    assert [d.entry_id for d in await inbox.take(1, set())] == [ids[0]]
    inbox.forget(ids[2])
    assert [d.entry_id for d in await inbox.take(2, set())] == [ids[1]]


def test_the_published_line_is_the_order_of_admission() -> None:
    turns = Turns()
    for n, client in enumerate(["a", "a", "a", "b", "c", "c"]):
        turns.add(castlog.StreamEntry(f"{n}-0", {b"id": f"cast{n}".encode(), b"client": client.encode()}, castlog.JOBS))
    order = [entry.id for entry in turns.order()]
    assert order == ["0-0", "3-0", "4-0", "1-0", "5-0", "2-0"]
    assert [entry.id for entry in turns.take(6)] == order
