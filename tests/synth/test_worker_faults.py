"""Faults that are not the cast's: worker deaths, Redis errors, SIGTERM hand-back, a receipt
lost between `eos` and XACK, and a poison chunk that kills every worker trying it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from jobstreams import read_dead, read_done
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

import castlog
from castlog import CastStore, Stamped, Start
from castlog.groups import ensure_group
from synth.worker import Worker
from tests.synth.support import StandIn, config, has_audio, log_of, pending_count, running, submit, terminal, wait_until

LONG = " ".join(f"Sentence number {n} is here." for n in range(6))


async def kill(worker: Worker, task: asyncio.Task[None]) -> None:
    """A death (kill -9): the worker's tasks end where they are; nothing is handed back."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert not worker.crew.hand.stopping


async def no_pending(redis: Redis) -> bool:
    return await pending_count(redis) == 0


@pytest.mark.rule("attempts-count-failures")
async def test_worker_deaths_do_not_use_up_the_attempts(redis: Redis, store: CastStore) -> None:
    cast_id = await submit(store, LONG)
    for n in range(3):  # three deaths, each after some progress: more than SYNTH_MAX_ATTEMPTS
        worker = Worker(config(max_attempts=1), redis, StandIn(rtf=0.2))
        task = asyncio.create_task(worker.run())
        await wait_until(lambda n=n: has_audio(store, cast_id, n + 1))  # type: ignore[misc]
        await kill(worker, task)
    async with running(Worker(config(max_attempts=1), redis, StandIn())):
        entries = await terminal(store, cast_id)
    assert entries[-1].kind == "eos"
    assert [e.record.i for e in castlog.playable(entries)] == list(range(6))  # type: ignore[union-attr]


@pytest.mark.rule("attempts-count-failures")
async def test_a_chunk_in_hand_at_every_death_is_a_poison_input_after_the_named_number(
    redis: Redis, store: CastStore,
) -> None:
    cast_id = await submit(store, "A fine start. Poison follows here. Never reached.")
    gate = threading.Event()  # the poison chunk never returns: its worker is killed meanwhile
    try:
        for _ in range(2):
            worker = Worker(config(max_attempts=10, max_crashes_per_chunk=2), redis, _Poisoned(gate))
            task = asyncio.create_task(worker.run())
            await wait_until(lambda w=worker: w.dispatcher.synth.in_poison.is_set())  # type: ignore[attr-defined]
            await kill(worker, task)
        async with running(Worker(config(max_attempts=10, max_crashes_per_chunk=2), redis, _Poisoned(gate))):
            entries = await terminal(store, cast_id)
            await wait_until(lambda: no_pending(redis))
    finally:
        gate.set()
    assert entries[-1].kind == "error"
    assert "sentence 1 was in hand when 2 workers died" in entries[-1].record.reason  # type: ignore[union-attr]
    assert len(await read_dead(redis)) == 1


class _Poisoned(StandIn):
    """Hangs (as if crashing) on the chunk that says "Poison"."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.poison_gate = gate
        self.in_poison = threading.Event()

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> Any:
        if "Poison" in text:
            self.in_poison.set()
            self.poison_gate.wait()
        return super().synthesize(text, voice, speed)


@pytest.mark.rule("attempts-count-failures")
async def test_a_redis_error_on_append_is_not_a_failed_attempt(
    redis: Redis, store: CastStore, monkeypatch: pytest.MonkeyPatch,
) -> None:
    cast_id = await submit(store, LONG)
    # neither a failed attempt nor a death with the chunk in hand, however often it happens
    worker = Worker(config(max_attempts=1, max_crashes_per_chunk=1), redis, StandIn())
    real, drops = worker.store.append_stamped, []  # the audio's appends

    async def flaky(cast: str, tail: int, records: list[Any]) -> Stamped:
        if getattr(records[0], "i", None) == 1 and len(drops) < 2:  # the second sentence, twice
            drops.append(tail)
            raise RedisConnectionError("Connection lost")
        return await real(cast, tail, records)

    monkeypatch.setattr(worker.store, "append_stamped", flaky)
    async with running(worker):
        entries = await terminal(store, cast_id)
        await wait_until(lambda: no_pending(redis))
    assert entries[-1].kind == "eos" and len(drops) == 2
    assert [e.record.i for e in castlog.playable(entries)] == list(range(6))  # type: ignore[union-attr]


@pytest.mark.rule("receipt-at-least-once")
async def test_a_job_whose_log_ends_in_eos_after_a_death_gets_its_receipt_and_is_acknowledged(
    redis: Redis, store: CastStore, monkeypatch: pytest.MonkeyPatch,
) -> None:
    cast_id = await submit(store, "One sentence. And two.")
    stuck = asyncio.Event()

    async def hang(redis: Redis, done: castlog.Done) -> None:
        await stuck.wait()  # dies here: after the eos, before the receipt and the XACK

    with monkeypatch.context() as patch:
        patch.setattr(castlog, "announce_done", hang)
        worker = Worker(config("dies", lease_s=1.0), redis, StandIn())
        task = asyncio.create_task(worker.run())
        assert (await terminal(store, cast_id))[-1].kind == "eos"
        await kill(worker, task)
    assert await pending_count(redis) == 1
    async with running(Worker(config("heir", lease_s=1.0), redis, StandIn())):
        await wait_until(lambda: no_pending(redis))
    assert [done.id for done in await read_done(redis)] == [cast_id]
    assert (await log_of(store, cast_id))[-1].kind == "eos"  # settled, not turned into an error


@pytest.mark.rule("sigterm-hands-back")
async def test_stop_hands_the_jobs_back_and_another_worker_takes_them_at_once(
    redis: Redis, store: CastStore,
) -> None:
    cast_id = await submit(store, LONG)
    first = Worker(config("first", lease_s=60.0), redis, StandIn(rtf=0.3))
    task = asyncio.create_task(first.run())
    await wait_until(lambda: has_audio(store, cast_id, 2))
    async with running(Worker(config("second", lease_s=60.0), redis, StandIn(rtf=0.3))):
        first.stop()
        await asyncio.wait_for(task, 10)
        entries = await terminal(store, cast_id, timeout_s=15)  # far sooner than the 60 s lease
        await wait_until(lambda: no_pending(redis))
    starts = [e.record for e in entries if isinstance(e.record, Start)]
    assert len(starts) == 2 and entries[-1].kind == "eos"
    consumers = {c["name"].decode() for c in await redis.xinfo_consumers(castlog.JOBS, castlog.GROUP)}
    assert "first" not in consumers  # it held nothing when it left


async def test_consumers_that_are_gone_and_hold_nothing_are_removed(redis: Redis, store: CastStore) -> None:
    await ensure_group(redis, castlog.JOBS, castlog.GROUP)
    for name in ("gone-1", "gone-2"):
        await redis.xgroup_createconsumer(castlog.JOBS, castlog.GROUP, name)
    await asyncio.sleep(0.6)
    assert not await _only(redis, "alive")
    async with running(Worker(config("alive", lease_s=0.5), redis, StandIn())):
        cast_id = await submit(store, "Short one.")
        await terminal(store, cast_id)
        await wait_until(lambda: _only(redis, "alive"), timeout_s=10)


async def _only(redis: Redis, name: str) -> bool:
    names = {c["name"].decode() for c in await redis.xinfo_consumers(castlog.JOBS, castlog.GROUP)}
    return names == {name}


@pytest.mark.rule("sigterm-hands-back")
async def test_a_rolling_restart_of_two_workers_keeps_every_cast_going(redis: Redis, store: CastStore) -> None:
    """Each worker in turn is stopped (SIGTERM) and replaced; the gap between two sentences of
    any cast stays far below the lease: the stopped worker handed its casts back, nobody waited
    its lease out. (The lease is long, so that a loaded machine's slow restart is not mistaken
    for a lease: the bound is a quarter of it.)"""
    lease_s = 120.0
    rtf, chunk_s = 0.3, 0.3 * len("Sentence number 10 is here.") * 0.05  # the stand-in's compute per chunk
    texts = [" ".join(f"Cast {k} sentence number {n} is here." for n in range(12)) for k in range(4)]
    cast_ids = [await submit(store, text) for text in texts]

    def worker(name: str) -> Worker:
        return Worker(config(name, lease_s=lease_s, max_active=4), redis, StandIn(rtf=rtf))

    a, b = worker("a"), worker("b")
    tasks = {a: asyncio.create_task(a.run()), b: asyncio.create_task(b.run())}
    for cast_id in cast_ids:
        await wait_until(lambda c=cast_id: has_audio(store, c, 2))  # type: ignore[misc]
    for old, new in ((a, worker("a2")), (b, worker("b2"))):
        old.stop()
        await asyncio.wait_for(tasks.pop(old), 10)
        tasks[new] = asyncio.create_task(new.run())
        await asyncio.sleep(1.5)
    try:
        logs = [await terminal(store, c, timeout_s=60) for c in cast_ids]
    finally:
        for w, task in tasks.items():
            w.stop()
            await asyncio.wait_for(task, 10)
    gaps = [max(later.ts - earlier.ts for earlier, later in zip(audio, audio[1:])) / 1000
            for audio in ([e for e in entries if e.kind == "audio"] for entries in logs)]
    print(f"rolling restart: chunk {chunk_s:.2f}s, largest gap between sentences per cast {gaps}")
    assert all(entries[-1].kind == "eos" for entries in logs)
    assert max(gaps) < lease_s / 4, gaps  # a lease waited out would show here
