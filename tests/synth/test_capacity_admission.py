"""Capacity-aware admission: the pure rule (demand, room, the forecast), then a worker with a
stand-in of a set speed and a real Redis under overload: casts admitted in order as the demand
fits, the rest waiting before their first audio with a place and an estimate that fall, nobody
starving, open casts first, and two workers' capacities adding up."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

import castlog
from castlog import Audio, CastStore, Entry, Queued, Start
from castlog.groups import ensure_group
from synth import clerk as clerk_module
from synth.capacity import Need, Pool, demand, forecast, known_capacity, known_rate, needs_of, room
from synth.cast import ActiveCast, Assignment, OpenText
from synth.clerk import Waiting
from synth.config import SynthConfig
from synth.scheduler import ModelSpeed
from synth.worker import Worker
from tests.synth.support import StandIn, config, has_audio, log_of, running, submit, terminal, wait_until
from tests.synth.test_worker_live import feed, open_cast

# Five paragraphs of about six seconds of the stand-in's speech each (50 ms a character).
TEXTS = tuple(
    f"Paragraph {n} begins here, slowly. It goes on for a while about the harbour, the boats and the "
    f"weather of the week. Then it ends, number {n}."
    for n in ("one", "two", "three", "four", "five")
)
# The stand-in makes audio at twice real time: capacity 2, so with the headroom one cast at a time
# is admitted until the one before leads far enough.
RTF = 0.5


async def submit_in_turn(store: CastStore, texts: tuple[str, ...]) -> list[str]:
    """One after another, each in a millisecond of its own: jobs of two key lanes in the same
    millisecond have no order between them (castlog/lanes.py), later ones do."""
    ids = []
    for text in texts:
        ids.append(await submit(store, text))
        await asyncio.sleep(0.002)
    return ids


def slow_config(consumer: str = "test-worker") -> SynthConfig:
    # the stand-in's speed is flat: two seconds of its audio tell it
    return config(consumer, queue_note_s=0.2, capacity_measure_s=2.0)


# ---- the rule, pure ----------------------------------------------------------------------------


@pytest.mark.rule("admit-within-capacity")
def test_demand_is_what_keeps_a_listener_from_stalling() -> None:
    assert demand(Need(10.0, 0.0)) == 1.0  # no lead: real time
    assert demand(Need(10.0, 10.0)) == 0.5  # half as fast is enough to end with nothing in hand
    assert demand(Need(0.0, 3.0)) == 0.0
    assert demand(Need(5.0, -2.0)) == 1.0  # already behind: as fast as it plays, at least


@pytest.mark.rule("admit-within-capacity")
def test_room_counts_newcomers_within_capacity_and_an_idle_worker_always_takes_one() -> None:
    assert room([], 0.0, 0.85) == 1  # speed not measured: one, to measure it
    assert room([Need(10.0, 0.0)], 0.0, 0.85) == 0
    assert room([Need(10.0, 0.0)], 2.0, 0.85) == 0  # 1 + 1 > 1.7
    assert room([Need(10.0, 30.0)], 2.0, 0.85) == 1  # 0.25 + 1 <= 1.7
    assert room([Need(10.0, 0.0)], 10.0, 0.85) == 7
    assert room([Need(10.0, 0.0, live=True)] * 3, 1.0, 0.85) == 1  # open casts never starve the line


@pytest.mark.rule("admit-within-capacity")
def test_forecast_puts_later_places_later_and_two_workers_start_them_sooner() -> None:
    busy = [Need(30.0, 0.0)]
    one = forecast([Pool(2.0, list(busy))], [30.0, 30.0, 30.0], headroom=0.85)
    assert all(s is not None for s in one)
    assert 0 < one[0] < one[1] < one[2]  # type: ignore[operator]
    two = forecast([Pool(2.0, list(busy)), Pool(2.0, list(busy))], [30.0, 30.0, 30.0], headroom=0.85)
    assert two[2] < one[2]  # type: ignore[operator]
    assert forecast([Pool(2.0, [])], [30.0], headroom=0.85, first_s=0.4) == [0.4]
    assert forecast([Pool(0.0, busy)], [30.0], headroom=0.85) == [None]  # nobody measured: no estimate
    assert forecast([Pool(2.0, list(busy))], [3000.0] * 3, headroom=0.85, horizon_s=100)[2] is None



@pytest.mark.rule("admit-within-capacity")
def test_forecast_replays_a_worker_at_the_rate_its_model_has_been_making_audio() -> None:
    busy = [Need(30.0, 0.0)]
    cautious = forecast([Pool(1.2, list(busy))], [30.0, 30.0], headroom=0.85)
    paced = forecast([Pool(1.2, list(busy), rate=2.4)], [30.0, 30.0], headroom=0.85)
    assert paced == forecast([Pool(2.4, list(busy))], [30.0, 30.0], headroom=0.85)  # the rate stands for it
    assert cautious[0] is not None and paced[0] is not None and paced[0] < cautious[0] / 2
    speed = ModelSpeed()
    speed.observe(0.8, 11, audio_s=0.7)  # a short first chunk: 0.5 s a reading is most of it
    for chars in (80, 50):
        speed.observe(0.5 + 0.02 * chars, chars, audio_s=chars / 16)
    assert speed.rate(5.0) == pytest.approx(5.0 / (0.5 + 0.02 * 80), rel=0.05)  # 80 characters whole
    assert speed.capacity < 1.5 < 2.0 < speed.rate(5.0)  # the capacity still counts the slow one
    assert known_rate(speed, 1000.0) == 0.0  # not measured enough yet


# ---- a worker under overload -------------------------------------------------------------------


def started_at(entries: list[Entry]) -> int | None:
    return next((e.ts for e in entries if isinstance(e.record, Start)), None)


def notes(entries: list[Entry]) -> list[tuple[int, Queued]]:
    return [(e.ts, e.record) for e in entries if isinstance(e.record, Queued)]


@pytest.mark.rule("admit-within-capacity")
@pytest.mark.rule("queue-noted")
async def test_overload_admits_in_order_and_the_rest_wait_with_a_falling_place_and_estimate(
    redis: Redis, store: CastStore
) -> None:
    ids = await submit_in_turn(store, TEXTS)
    worker = Worker(slow_config(), redis, StandIn(rtf=RTF))
    async with running(worker):
        await wait_until(lambda: has_audio(store, ids[0], 1))
        state = castlog.summarize(await log_of(store, ids[4]))  # what GET /api/casts/{id} folds
        logs = [await terminal(store, cast_id, timeout_s=120) for cast_id in ids]
    starts = [started_at(entries) for entries in logs]
    assert all(s is not None for s in starts), starts  # nobody starved
    assert starts == sorted(starts)  # type: ignore[type-var]  # first come, first admitted
    assert all(e.kind != "queue" for entries in logs for e in entries[next(
        i for i, e in enumerate(entries) if isinstance(e.record, Start)):]), "a note after its start"
    assert state.status == "queued" and state.queue_position is not None and state.queue_position >= 2
    last = notes(logs[4])
    places = [q.pos for _, q in last]
    assert len(places) >= 2 and places == sorted(places, reverse=True) and places[-1] == 1, places
    # the estimate, counted down from each note as a client shows it, falls
    known = [(ts, q.eta_ms) for ts, q in last if q.eta_ms >= 0]
    assert known, last
    assert len(known) >= 2 and known[-1][1] < known[0][1], known
    # the cast that waited longest was told so before it started, and how long, roughly
    end = starts[4]
    assert end is not None and known[0][0] < end and known[0][1] > 0
    # not shared evenly: the second waited for the first one's speed, the last for the first's end
    first_audio = next(e.ts for e in logs[0] if isinstance(e.record, Audio))
    assert starts[1] >= first_audio and starts[4] >= logs[0][-1].ts, (starts, first_audio)  # type: ignore[operator]


@pytest.mark.rule("admit-within-capacity")
async def test_an_open_cast_is_not_queued_behind_whole_texts_and_speaks_first(
    redis: Redis, store: CastStore
) -> None:
    ids = await submit_in_turn(store, TEXTS[:4])
    async with running(Worker(slow_config(), redis, StandIn(rtf=RTF))):
        await wait_until(lambda: has_audio(store, ids[0], 2))
        live, live_id = await open_cast(redis)
        await feed(live, live_id, 0, "A live answer. ", flush=True)
        await wait_until(lambda: has_audio(store, live_id, 1))
        waiting = [castlog.summarize(await log_of(store, cast_id)).status for cast_id in ids[2:]]
        assert (await live.close_text(live_id, "af_heart"))[0] == "ok"
        for cast_id in ids:
            await terminal(store, cast_id, timeout_s=120)
    assert "queued" in waiting  # the line still waited while the open cast spoke
    assert not notes(await log_of(store, live_id))


@pytest.mark.rule("admit-within-capacity")
async def test_two_workers_capacities_add_up(redis: Redis, store: CastStore) -> None:
    ids = await submit_in_turn(store, TEXTS[:4])
    one = Worker(slow_config("w1"), redis, StandIn(rtf=RTF))
    two = Worker(slow_config("w2"), redis, StandIn(rtf=RTF))
    async with running(one), running(two):
        logs = [await terminal(store, cast_id, timeout_s=120) for cast_id in ids]
        assert await redis.hlen(castlog.SYNTH_CAPACITY) == 2  # each published its own capacity
        assert await redis.get(castlog.QUEUE_CLERK) in (b"w1", b"w2")  # one of them notes the line
    spans = [(started_at(e), e[-1].ts) for e in logs]
    assert any(sum(1 for a, b in spans if a <= s < b) >= 2 for s, _ in spans), spans  # type: ignore[operator]
    assert all(s is not None for s, _ in spans)
    # stopped: neither counts in a forecast any more, and the clerk's lock is free at once
    assert await redis.exists(castlog.SYNTH_CAPACITY, castlog.QUEUE_CLERK) == 0


async def test_a_note_between_the_admitters_read_and_its_start_does_not_lose_the_cast(
    redis: Redis, store: CastStore
) -> None:
    cast_id = await submit(store, TEXTS[0])
    await store.append(cast_id, 1, [Queued(pos=1, eta_ms=500)])
    worker = Worker(config(), redis, StandIn())
    original = worker.crew.reader.read_all

    async def read_then_note(cid: str, batch: int = 256) -> tuple[list[Entry], int]:
        got = await original(cid, batch)
        await store.append(cid, got[1], [Queued(pos=1, eta_ms=100)])  # the clerk, just then
        return got

    worker.crew.reader.read_all = read_then_note  # type: ignore[method-assign]
    async with running(worker):
        entries = await terminal(store, cast_id)
    assert [e.kind for e in entries[:4]] == ["meta", "queue", "queue", "start"]
    assert isinstance(entries[-1].record, castlog.Eos) and any(isinstance(e.record, Audio) for e in entries)
    await asyncio.sleep(0)


@pytest.mark.rule("admit-within-capacity")
def test_capacity_follows_a_slowdown_at_once_and_a_speedup_slowly() -> None:
    speed = ModelSpeed()
    assert speed.capacity == 0  # nothing measured: admission takes one cast to measure it
    speed.observe(0.5, 20, 1.0)
    assert speed.capacity == pytest.approx(2.0)
    assert known_capacity(speed, 10.0) == 0  # one second of audio: not enough to admit on
    assert known_capacity(speed, 1.0) == pytest.approx(2.0)
    speed.observe(1.0, 20, 1.0)  # the machine got busy: admission knows at once
    assert speed.capacity == pytest.approx(1.0)
    speed.observe(0.25, 20, 1.0)  # one fast chunk does not undo it
    assert 1.0 < speed.capacity < 1.2


@pytest.mark.rule("admit-within-capacity")
def test_the_audio_a_text_will_make_counts_its_speed() -> None:
    speed = ModelSpeed()
    assert speed.audio_s(30, 2.0) == pytest.approx(speed.audio_s(30) / 2)  # before any chunk
    speed.observe(0.5, 20, 1.0, speed=2.0)  # 20 characters read at twice the speed: a second
    assert speed.audio_s(20) == pytest.approx(2.0)  # at speed 1, twice that
    assert speed.audio_s(20, 2.0) == pytest.approx(1.0)
    assert speed.audio_s(20, 0.5) == pytest.approx(4.0)  # a slow reader's text makes more to wait for
    # an open cast is read at its recipe's speed, which its `meta` does not carry
    job = Assignment("1-0", "c" * 16, 0, 1, castlog.JOBS_LIVE)
    whole = ActiveCast(job, "af_heart", ["x" * 20], attempt=1, job_attempt=1, resume_from=0, tail=1,
                       offset_ms=0, first_audio_ts=None, speed=0.5)
    live = ActiveCast(job, "af_heart", ["x" * 20], attempt=1, job_attempt=1, resume_from=0, tail=1,
                      offset_ms=0, first_audio_ts=None, open_text=OpenText(speed=2.0))
    assert [n.left_s for n in needs_of([whole, live], speed, 0.0)] == pytest.approx([4.0, 1.0])


@pytest.mark.rule("queue-noted")
async def test_a_cast_that_fails_for_good_while_the_clerk_reads_the_line_is_not_noted_after_its_error(
    redis: Redis, store: CastStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    cast_id = await submit(store, TEXTS[0], voice="zz_nobody")
    clerk = Worker(slow_config(), redis, StandIn()).clerk
    await ensure_group(redis, castlog.JOBS, castlog.GROUP)  # as the worker does at its start
    await clerk.line()  # the clerk reads the line, this cast in it; then a worker gives up on it
    (meta,) = await log_of(store, cast_id)
    await store.append(cast_id, meta.seq_num + 1, [castlog.Error(reason="unknown voice", attempts=1)])
    await clerk._note(Waiting(cast_id, 1, 1.0), 500)
    assert [e.kind for e in await log_of(store, cast_id)] == ["meta", "error"]  # it stays failed

    # submitted again after that error, it waits in line once more: noted
    monkeypatch.setattr(clerk_module, "ERROR_MARGIN_MS", 0)
    await asyncio.sleep(0.005)  # the line is read in a later millisecond than the error was written
    await clerk.line()
    await clerk._note(Waiting(cast_id, 1, 1.0), 500)
    assert [e.kind for e in await log_of(store, cast_id)] == ["meta", "error", "queue"]
