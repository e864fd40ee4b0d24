"""Whole texts admitted in turn by client: a worker with a stand-in synthesizer and a real Redis,
client A's burst queued before client B's one cast; B's cast starts after at most one of A's."""

from __future__ import annotations

import asyncio

import pytest

import castlog
import chunking
from castlog import CastStore, Meta, Start
from castlog.lanes import LaneMover
from synth.worker import Worker
from tests.synth.support import StandIn, log_of, running, wait_until
from tests.synth.test_capacity_admission import RTF, TEXTS, slow_config


async def submit_as(store: CastStore, client: str, text: str) -> str:
    cast_id = castlog.content_id(text, "af_heart")
    meta = Meta(title="t", voice="af_heart", chars=len(text), sentences=chunking.count_chunks(text), created_at=0)
    await store.submit(cast_id, text, "af_heart", meta, client=castlog.client_tag(client))
    await asyncio.sleep(0.002)  # each job in a millisecond of its own: lanes keep no order within one
    return cast_id


async def started(store: CastStore, cast_id: str) -> int | None:
    return next((e.ts for e in await log_of(store, cast_id) if isinstance(e.record, Start)), None)


@pytest.mark.rule("fair-queues")
async def test_one_clients_burst_delays_anothers_cast_by_one_of_its_own(store: CastStore) -> None:
    burst = [await submit_as(store, "192.0.2.1", text) for text in TEXTS]
    other = await submit_as(store, "192.0.2.2", "Another client's short text. It waits its turn.")
    # The queue as a busy worker finds it: every job moved from its key lane into `jobs` already.
    mover = LaneMover(store.redis, "mover", lease_ms=30_000, single_redis=True)
    await mover.open()
    assert await mover.sweep(10) == len(TEXTS) + 1
    worker = Worker(slow_config(), store.redis, StandIn(rtf=RTF))
    async with running(worker):
        async def other_started() -> bool:
            return await started(store, other) is not None

        await wait_until(other_started, 60)
        begun = await started(store, other)
        before = [s for s in [await started(store, cast_id) for cast_id in burst] if s is not None and s < begun]  # type: ignore[operator]
    assert len(before) <= 1, f"{len(before)} of A's casts started before B's one"
