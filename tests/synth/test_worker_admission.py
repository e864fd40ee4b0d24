"""First-chunk-first admission with a stand-in synthesizer and a real Redis: casts whose jobs are
read together each get their first clause before any gets a second chunk."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

import chunking
from castlog import CastStore
from synth.worker import Worker
from tests.synth.support import StandIn, config, running, submit, terminal

TEXTS = (
    "Good morning Clara, and welcome to the weekly operations summary. We have three items today.",
    "The lighthouse keeper climbed the spiral stairs just before sunset. The lamp was lit.",
    "Annual review: a year of steady work on the city's water network. Leaks fell by a third.",
)


@pytest.mark.rule("first-chunks-first")
async def test_jobs_read_in_one_batch_each_get_their_first_clause_before_any_second_chunk(
    redis: Redis, store: CastStore
) -> None:
    ids = [await submit(store, text) for text in TEXTS]  # queued before the worker reads: one batch
    synth = StandIn()  # instant: a second chunk would be ready long before the third admission
    worker = Worker(config(), redis, synth)
    # A worker that has measured its (instant) model: its capacity admits the whole batch at once
    # (one that has not admits one cast until its first chunk is timed).
    worker.crew.speed.observe(0.01, 200, 10.0)
    async with running(worker):
        for cast_id in ids:
            await terminal(store, cast_id)
    firsts = [chunking.split_text(text)[0] for text in TEXTS]
    assert sorted(synth.calls[:3]) == sorted(firsts), synth.calls[:4]
    assert all(len(first) <= 30 for first in firsts)
