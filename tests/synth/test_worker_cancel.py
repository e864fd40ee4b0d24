"""Cancel in the worker (real Redis, a stand-in synthesizer): the chunk in hand is the last, the
cast ends with `eos` marked cancelled, a queued cast is cut at admission, an open cast waiting
for text ends at once."""

from __future__ import annotations

import threading

import pytest
from redis.asyncio import Redis

import castlog
import chunking
from castlog import Audio, CastStore, Eos, LiveStore, Meta
from synth.worker import Worker
from tests.synth.support import StandIn, config, has_audio, log_of, running, submit, terminal, wait_until

LONG = " ".join(f"This is sentence number {n} of a long text that goes on." for n in range(1, 30))


def _audio(entries: list[castlog.Entry]) -> list[Audio]:
    return [e.record for e in entries if isinstance(e.record, Audio)]


@pytest.mark.rule("cancel-cuts-short")
async def test_a_cancel_stops_at_the_chunk_in_hand_and_ends_the_cast_as_cancelled(
    redis: Redis, store: CastStore
) -> None:
    gate = threading.Event()
    standin = StandIn(gate=gate)
    cast_id = await submit(store, LONG)
    async with running(Worker(config(), redis, standin)):
        gate.set()
        await wait_until(lambda: has_audio(store, cast_id, 2))
        gate.clear()  # the next inference waits: it is the chunk in hand when the cancel comes
        standin.started.clear()
        await wait_until(lambda: _started_again(standin))
        assert await castlog.cancel(redis, cast_id) == "ok"
        calls = len(standin.calls)
        gate.set()
        entries = await terminal(store, cast_id)
    eos = entries[-1].record
    audio = _audio(entries)
    assert isinstance(eos, Eos) and eos.cancelled and eos.sentences == len(audio)
    assert len(audio) < len(chunking.split_text(LONG))
    assert len(standin.calls) <= calls + 1, "no chunk after the one in hand"
    state = castlog.summarize(entries)
    assert state.status == "done" and state.cancelled
    assert await castlog.cancel(redis, cast_id) == "ended"


async def _started_again(standin: StandIn) -> bool:
    return standin.started.is_set()


@pytest.mark.rule("cancel-cuts-short")
async def test_a_cast_cancelled_while_queued_ends_at_admission_with_no_audio(redis: Redis, store: CastStore) -> None:
    cast_id = await submit(store, LONG)
    assert await castlog.cancel(redis, cast_id) == "ok"
    standin = StandIn()
    async with running(Worker(config(), redis, standin)):
        entries = await terminal(store, cast_id)
    assert entries[-1].record == Eos(sentences=0, audio_ms=0, attempts=1, cancelled=True)
    assert standin.calls == []


@pytest.mark.rule("cancel-cuts-short")
async def test_an_open_cast_waiting_for_text_ends_at_once_on_cancel(redis: Redis, store: CastStore) -> None:
    live = LiveStore(redis)
    meta = Meta(title="live", voice="af_heart", chars=0, sentences=0, created_at=0, live=True)
    cast_id = (await live.open("af_heart", meta)).cast_id
    text = "A first sentence. And then"
    await live.append_text(cast_id, 0, len(text), text, max_chars=10_000)
    async with running(Worker(config(), redis, StandIn())):
        await wait_until(lambda: has_audio(store, cast_id, 1))
        assert await castlog.cancel(redis, cast_id) == "ok"
        entries = await terminal(store, cast_id, timeout_s=10)
    assert [a.t for a in _audio(entries)] == ["A first sentence."]
    eos = entries[-1].record
    assert isinstance(eos, Eos) and eos.cancelled and eos.sentences == 1
    assert [e.kind for e in await log_of(store, cast_id)][-1] == "eos"


async def test_cancelling_no_cast_is_missing(redis: Redis) -> None:
    assert await castlog.cancel(redis, "AAAAAAAAAAAA") == "missing"
    assert await redis.exists(castlog.keys.cancel_key("AAAAAAAAAAAA")) == 0
