"""Open (live) casts in the worker, with a stand-in synthesizer and a real Redis: sentences as
the text grows, waiting without holding anyone up, live-first scheduling, flush, the idle close,
and a restart in the middle."""

from __future__ import annotations

import asyncio
import threading

import pytest
from redis.asyncio import Redis

import castlog
import chunking
from castlog import Audio, CastStore, LiveStore, Meta, RateLimiter, Start
from synth.cast import OpenText
from synth.scheduler import RAMP_MIN_CHARS
from synth.worker import Worker
from tests.synth.support import StandIn, config, has_audio, log_of, running, submit, terminal, wait_until

TEXT = "Hello there. This is a live cast, fed in pieces. It has three sentences."
VOICE = "af_heart"


def live_meta() -> Meta:
    return Meta(title="live", voice=VOICE, chars=0, sentences=0, created_at=0, live=True)


async def open_cast(redis: Redis) -> tuple[LiveStore, str]:
    live = LiveStore(redis)
    return live, (await live.open(VOICE, live_meta())).cast_id


async def feed(live: LiveStore, cast_id: str, offset: int, text: str, *, flush: bool = False) -> int:
    answer, end = await live.append_text(cast_id, offset, len(text), text, max_chars=100_000, flush=flush)
    assert answer == "ok", answer
    return end


def audio_of(entries: list[castlog.Entry]) -> list[Audio]:
    return [e.record for e in entries if isinstance(e.record, Audio)]


async def test_sentences_are_spoken_as_they_complete_and_close_ends_the_cast(redis: Redis, store: CastStore) -> None:
    live, cast_id = await open_cast(redis)
    first, rest = TEXT[:20], TEXT[20:]  # "Hello there. This is" completes the first sentence only
    async with running(Worker(config(), redis, StandIn())):
        end = await feed(live, cast_id, 0, first)
        await wait_until(lambda: has_audio(store, cast_id, 1))
        assert [a.t for a in audio_of(await log_of(store, cast_id))] == ["Hello there."]
        end = await feed(live, cast_id, end, rest)
        assert (await live.close_text(cast_id, VOICE))[0] == "ok"
        entries = await terminal(store, cast_id)
    chunks = chunking.split_text(TEXT)
    audio = audio_of(entries)
    assert [a.t for a in audio] == chunks and [a.i for a in audio] == list(range(len(chunks)))
    assert audio[0].n == 1 and audio[-1].n == len(chunks)  # the plan grows
    assert entries[-1].record == castlog.Eos(sentences=len(chunks), audio_ms=sum(a.d for a in audio), attempts=1)
    assert castlog.summarize(entries).planned == len(chunks)
    assert await redis.xpending(castlog.JOBS_LIVE, castlog.GROUP) == {
        "pending": 0, "min": None, "max": None, "consumers": []
    }


async def test_open_cast_waiting_for_text_holds_up_no_batch_cast_and_spends_no_attempt(
    redis: Redis, store: CastStore
) -> None:
    live, cast_id = await open_cast(redis)
    async with running(Worker(config(max_active=1), redis, StandIn())):
        await feed(live, cast_id, 0, "A first sentence. And")
        batch = await submit(store, "A whole text. It is read while the live cast waits.")
        assert (await terminal(store, batch))[-1].kind == "eos"
        await feed(live, cast_id, 21, " the rest.")
        await live.close_text(cast_id, VOICE)
        entries = await terminal(store, cast_id)
    assert [e.record.attempt for e in entries if isinstance(e.record, Start)] == [1]
    assert [a.t for a in audio_of(entries)] == ["A first sentence.", "And the rest."]


async def test_flush_speaks_an_unfinished_sentence_now(redis: Redis, store: CastStore) -> None:
    live, cast_id = await open_cast(redis)
    async with running(Worker(config(), redis, StandIn())):
        end = await feed(live, cast_id, 0, "Let me think", flush=True)
        await wait_until(lambda: has_audio(store, cast_id, 1))
        await feed(live, cast_id, end, " about it. Done.")
        await live.close_text(cast_id, VOICE)
        entries = await terminal(store, cast_id)
    assert [a.t for a in audio_of(entries)] == ["Let me think", "about it.", "Done."]


@pytest.mark.rule("open-sentence-first")
async def test_a_live_sentence_goes_before_batch_lead_work(redis: Redis, store: CastStore) -> None:
    model = StandIn(rtf=0.02)
    batch_text = " ".join(f"Batch sentence number {k} is here." for k in range(40))
    live, cast_id = await open_cast(redis)
    async with running(Worker(config(), redis, model)):
        batch = await submit(store, batch_text)
        await wait_until(lambda: has_audio(store, batch, 3))
        before = len(model.calls)  # the chunk in the model now is the last of these
        await feed(live, cast_id, 0, "Live one now. X")
        await wait_until(lambda: has_audio(store, cast_id, 1))
        at = model.calls.index("Live one now.")
        done_batch = sum(1 for e in await log_of(store, batch) if e.kind == "audio")
        await live.close_text(cast_id, VOICE)
        await terminal(store, cast_id)
    # The live sentence came next, or one batch chunk later (picked while its text was on the
    # way): a batch cast far ahead of its listener does not go first.
    assert done_batch < len(chunking.split_text(batch_text))
    assert at <= before + 1
    assert "X" in model.calls[at:]


async def test_idle_open_cast_is_closed_by_the_worker_and_its_place_freed(redis: Redis, store: CastStore) -> None:
    live, cast_id = await open_cast(redis)
    async with running(Worker(config(live_idle_s=0.3, max_live_held=1), redis, StandIn())):
        await feed(live, cast_id, 0, "Nobody closes this. Left unfinished")
        # held first (jobs of two key lanes have no order between them: wait for it)
        await wait_until(lambda: has_audio(store, cast_id, 1))
        _, waiting = await open_cast(redis)  # no place for it while the idle cast is held
        await feed(live, waiting, 0, "Next in line.", flush=True)
        entries = await terminal(store, cast_id)
        await wait_until(lambda: has_audio(store, waiting, 1))
        await live.close_text(waiting, VOICE)
        after = await terminal(store, waiting)
    assert [a.t for a in audio_of(entries)] == ["Nobody closes this.", "Left unfinished"]
    started = next(e for e in after if isinstance(e.record, Start))
    assert started.ts >= entries[-1].ts  # admitted once the idle cast had ended: its place was freed
    text = await live.read_text(cast_id)
    assert text is not None and text.closed is not None
    assert text.closed.cid == castlog.content_id("Nobody closes this. Left unfinished", VOICE)


@pytest.mark.rule("open-restart-resumes")
async def test_restart_in_the_middle_resumes_an_open_cast(redis: Redis, store: CastStore) -> None:
    gate = threading.Event()
    live, cast_id = await open_cast(redis)
    end = await feed(live, cast_id, 0, "One is here. Two is here. Three")
    async with running(Worker(config(consumer="w"), redis, StandIn(gate=None))):
        await wait_until(lambda: has_audio(store, cast_id, 2))
    # the first worker stopped with the cast open; its job stays pending and resumes
    end = await feed(live, cast_id, end, " is here.")
    await live.close_text(cast_id, VOICE)
    gate.set()
    async with running(Worker(config(consumer="w"), redis, StandIn())):
        entries = await terminal(store, cast_id)
    starts = [(e.record.attempt, e.record.resume_from) for e in entries if isinstance(e.record, Start)]
    assert starts == [(1, 0), (2, 2)]
    played = [e.record.t for e in castlog.playable(entries) if isinstance(e.record, Audio)]
    assert played == ["One is here.", "Two is here.", "Three is here."]


@pytest.mark.rule("chunker-equals-split")
def test_chunker_gives_the_batch_chunks_however_the_text_is_cut() -> None:
    text = (
        "Dr. Smith arrived at 3.30 p.m. sharp. \"Why?\" she asked… and left!  Then, after a very long "
        "pause that went on, and on, and on; past any reasonable length — well past it, she "
        "returned: nobody knew why. 新しい文。もう一つ！ End"
    )
    want = chunking.split_text(text)
    for cut in range(len(text) + 1):
        state = OpenText()
        state.add(state.chunker.feed(text[:cut]))
        state.add(state.chunker.feed(text[cut:]))
        state.add(state.chunker.flush())
        assert state.chunks == want, cut
    state = OpenText()
    for ch in text:
        state.add(state.chunker.feed(ch))
    state.add(state.chunker.flush())
    assert state.chunks == want


async def feed_read_ids(redis: Redis) -> set[int]:
    """The ids of the connections blocked in an XREAD: the worker's one stream loop's, which
    follows the live feed's catalogs with cancels and deletes (the inbox blocks in XREADGROUP)."""
    while True:
        ids = {int(c["id"]) for c in await redis.client_list() if c["cmd"] == "xread" and "b" in c["flags"]}
        if ids:
            return ids
        await asyncio.sleep(0.01)


async def unblocks(redis: Redis) -> int:
    return int((await redis.info("commandstats")).get("cmdstat_client|unblock", {}).get("calls", 0))


async def test_a_newly_admitted_open_cast_wakes_the_feed_without_dropping_its_connection(
    redis: Redis, store: CastStore
) -> None:
    """Before, the feed cancelled its blocked XREAD to add a catalog, and the client dropped the
    connection with it: a new connection per admitted open cast. The read that follows the
    catalogs is the one that follows cancels and deletes, woken by an XADD to its own wake stream
    (synth's Redis user holds no CLIENT UNBLOCK): it blocks SYNTH_POLL_S, so only the wake-up
    brings a newly admitted cast's text in time."""
    live, first = await open_cast(redis)
    called = await unblocks(redis)
    async with running(Worker(config(poll_s=60.0), redis, StandIn())):
        await feed(live, first, 0, "Hello there.", flush=True)
        await wait_until(lambda: has_audio(store, first, 1), 20)
        before = await feed_read_ids(redis)
        assert len(before) == 1  # one blocked XREAD for the catalogs, cancels and deletes
        others = [(await open_cast(redis))[1] for _ in range(3)]
        for cast_id in others:
            await feed(live, cast_id, 0, "Hello there.", flush=True)
        for cast_id in others:
            await wait_until(lambda c=cast_id: has_audio(store, c, 1), 20)  # type: ignore[misc]
        assert await feed_read_ids(redis) == before
        assert await unblocks(redis) == called
        assert [k async for k in redis.scan_iter("tail/wake/synth/*")]  # the loop's wake stream
        for cast_id in [first, *others]:
            assert (await live.close_text(cast_id, VOICE))[0] == "ok"
            await terminal(store, cast_id)


@pytest.mark.rule("live-fair")
async def test_idle_open_casts_never_keep_another_cast_from_its_first_audio(redis: Redis, store: CastStore) -> None:
    """Finding 2 of #21: one client's open casts, fed a character each, held every live place
    until they idled out (120 s), and another client's cast got no audio meanwhile."""
    live = LiveStore(redis)
    hoard = [(await live.open(VOICE, live_meta())).cast_id for _ in range(3)]
    async with running(Worker(config(max_live=2, live_idle_s=600), redis, StandIn())):
        for cast_id in hoard:
            await feed(live, cast_id, 0, "x")
        await wait_until(lambda: _all_started(store, hoard))
        mine = (await live.open(VOICE, live_meta())).cast_id
        await feed(live, mine, 0, "Served at once. And", flush=False)
        await wait_until(lambda: has_audio(store, mine, 1))
        for cast_id in [*hoard, mine]:
            await live.close_text(cast_id, VOICE)
            await terminal(store, cast_id)


async def _all_started(store: CastStore, ids: list[str], *, every: bool = False) -> bool:
    """Two of ``ids`` admitted (the worker's places at max_live=2 before the change), or all."""
    logs = [await log_of(store, cast_id) for cast_id in ids]
    started = sum(1 for entries in logs if any(isinstance(e.record, Start) for e in entries))
    return started == len(ids) if every else started >= 2


@pytest.mark.rule("live-fair")
async def test_a_client_with_one_open_cast_is_served_within_one_turn_of_a_client_with_many(
    redis: Redis, store: CastStore
) -> None:
    """#21's leftover: live turns went by cast, so one client's four open casts, each with text
    ready, each went before another client's one. Counted in the model's chunks, not in time."""
    limiter = RateLimiter(redis, castlog.INTAKE_SCOPE, 1000.0, 1000)  # as intake opens: by client
    live = LiveStore(redis)
    hoard = [(await live.open(VOICE, live_meta(), limit=(limiter, "127.0.0.2"))).cast_id for _ in range(4)]
    mine = (await live.open(VOICE, live_meta(), limit=(limiter, "127.0.0.3"))).cast_id
    for k, cast_id in enumerate(hoard):
        await feed(live, cast_id, 0, f"Hoard {k} says one. Hoard {k} says two. Hoard {k} says three. And")
    await feed(live, mine, 0, "Mine says one. Mine says two. And")
    gate = threading.Event()  # the model waits until every cast is in hand with its text ready
    model = StandIn(gate=gate)
    async with running(Worker(config(), redis, model)):
        await wait_until(lambda: _all_started(store, [*hoard, mine], every=True))
        gate.set()
        await wait_until(lambda: has_audio(store, mine, 1))
        for cast_id in [*hoard, mine]:
            await live.close_text(cast_id, VOICE)
            await terminal(store, cast_id)
    first_mine = next(i for i, text in enumerate(model.calls) if text.startswith("Mine"))
    assert first_mine <= 1, model.calls  # by cast it came fifth, after one chunk of each of the four
    recipes = [await castlog.read_recipe(redis, c) for c in [*hoard, mine]]
    tags = {r.client for r in recipes if r is not None}
    assert len(tags) == 2 and "127.0.0.2" not in str(tags)  # a tag per client, never the address


async def test_a_long_live_sentence_is_cut_so_its_audio_messages_keep_coming(redis: Redis, store: CastStore) -> None:
    # a model at about half real time and a gap of half a second: each chunk after the first at
    # most the ramp's shortest (the model's time for it is within the gap, or as short as a chunk gets)
    text = ("Sure. The order you placed on Monday left our warehouse this morning and should reach "
            "the depot in your town by Thursday afternoon at the latest.")
    live, cast_id = await open_cast(redis)
    async with running(Worker(config(live_gap_s=0.5, chunk_cache_bytes=0), redis, StandIn(rtf=0.5))):
        await feed(live, cast_id, 0, text)
        assert (await live.close_text(cast_id, VOICE))[0] == "ok"
        entries = await terminal(store, cast_id)
    made = [a.t for a in audio_of(entries)]
    assert " ".join(made) == text and len(made) > len(chunking.split_text(text))
    assert all(len(t) <= RAMP_MIN_CHARS for t in made[1:]), made


@pytest.mark.rule("live-fair")
async def test_a_full_worker_closes_the_casts_that_never_said_anything_for_one_that_speaks(
    redis: Redis, store: CastStore
) -> None:
    """#35 item 10: empty open casts from a few addresses held every place of a worker
    (SYNTH_MAX_LIVE_HELD) until they idled out (65 s), again and again; another client's cast with
    text waited the whole time. While the worker is full, a cast without any text is closed after
    SYNTH_LIVE_EMPTY_S and the one with text gets its place."""
    live = LiveStore(redis)
    hoard = [(await live.open(VOICE, live_meta())).cast_id for _ in range(2)]
    worker = Worker(config(max_live_held=2, live_idle_s=600, live_empty_s=0.3), redis, StandIn())
    async with running(worker):
        await wait_until(lambda: _all_started(store, hoard, every=True))
        mine = (await live.open(VOICE, live_meta())).cast_id
        await feed(live, mine, 0, "Served soon. And", flush=False)
        await wait_until(lambda: has_audio(store, mine, 1))
        for cast_id in hoard:  # closed as they were: empty, nothing spoken
            entries = await terminal(store, cast_id)
            assert audio_of(entries) == []
            text = await live.read_text(cast_id)
            assert text is not None and text.closed is not None
        await live.close_text(mine, VOICE)
        assert [a.t for a in audio_of(await terminal(store, mine))] == ["Served soon.", "And"]
