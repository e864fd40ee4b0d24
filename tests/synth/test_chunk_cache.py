"""The chunk cache: a chunk the model made once is appended again from Redis, by any worker, as the
same bytes, flagged in its header; the cache keeps to its byte budget and can be turned off."""

from __future__ import annotations

import numpy as np
import pytest
from redis.asyncio import Redis

from castlog import Audio, CastStore, Eos, summarize
from castlog.records import decode_fields, encode_fields, encode_headers
from synth import chunkcache
from synth.broadcasts import CancelHandler
from synth.cast import heads
from synth.chunkcache import ChunkCache, chunk_key
from synth.worker import Worker
from tests.synth.support import StandIn, config, running, submit, terminal

FIRST = "Sure, let me check that for you. Your order left the warehouse this morning. Is there anything else?"
SECOND = "Sure, let me check that for you. Your order left the warehouse this morning. It arrives on Friday."


def audio_of(entries: list) -> list[Audio]:  # type: ignore[type-arg]
    return [e.record for e in entries if isinstance(e.record, Audio)]


@pytest.mark.rule("chunk-cache-reuses")
async def test_a_repeated_text_in_another_cast_plays_without_the_model(redis: Redis, store: CastStore) -> None:
    async with running(Worker(config(), redis, StandIn())):
        first = audio_of(await terminal(store, await submit(store, FIRST)))
    model = StandIn()
    async with running(Worker(config(), redis, model)):  # another worker (a restart): the cache is in Redis
        entries = await terminal(store, await submit(store, SECOND))
    second = audio_of(entries)
    assert [a.t for a in second][:3] == [a.t for a in first][:3] == [
        "Sure, let me check", "that for you.", "Your order left the warehouse this morning."]
    assert model.calls == ["It arrives on Friday."]  # only the new sentence went to the model
    assert [a.c for a in second] == [True, True, True, False] and not any(a.c for a in first)
    assert [a.body for a in second[:3]] == [a.body for a in first[:3]]  # heard exactly as the fresh ones
    assert [(a.d, a.w) for a in second[:3]] == [(a.d, a.w) for a in first[:3]]
    assert summarize(entries).reused == 3


async def test_a_cancel_while_the_cache_is_asked_for_a_head_drops_the_chunk_and_the_worker_goes_on(
    redis: Redis, store: CastStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The abuse campaign (#35) stopped a worker: a cancel landed while the cache was asked for one
    head of a chunk, and the next head's context read a chunk the cancel had dropped (IndexError)."""
    worker = Worker(config(), redis, StandIn())
    looked_up: list[str] = []
    lookup = ChunkCache.get

    async def cancelled_meanwhile(cache: ChunkCache, key: str) -> chunkcache.Hit | None:
        looked_up.append(key)
        if len(looked_up) == 3:  # the third chunk's first head: its cast is cancelled while Redis answers
            await CancelHandler(worker.crew, worker.outcomes).handle({b"id": cancelled.encode()})
        return await lookup(cache, key)

    monkeypatch.setattr(ChunkCache, "get", cancelled_meanwhile)
    assert len(heads("Your order left the warehouse this morning.")) > 1  # FIRST's third chunk (after a cut)
    async with running(worker) as task:
        cancelled = await submit(store, FIRST)
        entries = await terminal(store, cancelled)
        end = entries[-1].record
        assert isinstance(end, Eos) and end.cancelled and len(audio_of(entries)) == end.sentences < 4
        monkeypatch.setattr(ChunkCache, "get", lookup)
        after = await submit(store, SECOND)  # the worker goes on
        assert [a.t for a in audio_of(await terminal(store, after))][-1] == "It arrives on Friday."
        assert not task.done()
    assert len(looked_up) == 3  # no head after the cancel was looked up


async def test_with_the_cache_off_every_chunk_goes_to_the_model_and_nothing_is_kept(
    redis: Redis, store: CastStore
) -> None:
    off = config(chunk_cache_bytes=0)
    async with running(Worker(off, redis, StandIn())):
        await terminal(store, await submit(store, FIRST))
    model = StandIn()
    async with running(Worker(off, redis, model)):
        second = audio_of(await terminal(store, await submit(store, SECOND)))
    assert len(model.calls) == len(second) == 4 and not any(a.c for a in second)
    assert [k async for k in redis.scan_iter(match="synth/chunk*")] == []


@pytest.mark.rule("chunk-cache-reuses")
async def test_the_cache_keeps_to_its_budget_evicting_the_least_recently_used(redis: Redis) -> None:
    pcm = np.zeros(24_000, np.float32)  # a second of audio: 96 000 bytes and a little
    keys = [chunk_key("m", f"chunk {n}", "af_heart", 1.0, "", "") for n in range(4)]
    cache = ChunkCache(redis, budget=3 * 96_100)
    for key in keys[:3]:
        await cache.put(key, pcm, [("chunk", 0, 900)], 0.5)
    hit = await cache.get(keys[0])  # used again: the second is now the least recently used
    assert hit is not None and hit.output()[1] == [("chunk", 0, 900)] and np.array_equal(hit.output()[0], pcm)
    await cache.put(keys[3], pcm, [], 0.5)
    assert await cache.get(keys[1]) is None
    assert all([await cache.get(k) is not None for k in (keys[0], keys[2], keys[3])])
    held = [await redis.strlen(k) async for k in redis.scan_iter(match=chunkcache.ENTRY_PREFIX + "{*")]
    assert len(held) == 3 and sum(held) == cache.held <= cache.budget
    assert int(await redis.get(chunkcache.TOTAL)) == cache.held
    huge = ChunkCache(redis, budget=1000)  # an entry larger than the whole budget is not kept
    await huge.put(keys[1], pcm, [], 0.5)
    assert await huge.get(keys[1]) is None and huge.held <= 1000


def test_the_key_is_what_the_model_is_fed() -> None:
    key = chunk_key("kokoro/onnx", "of sand", "af_heart", 1.0, "", "built a castle")
    assert key == chunk_key("kokoro/onnx", "of sand", "af_heart", 1.0, "", "built a castle")
    others = [chunk_key("kokoro/onnx", "of sand", "af_heart", 1.0, "", "a castle"),  # other words before
              chunk_key("kokoro/onnx", "of sand", "af_heart", 1.0, "on", "built a castle"),
              chunk_key("kokoro/onnx", "of sand", "bf_emma", 1.0, "", "built a castle"),
              chunk_key("kokoro/onnx", "of sand", "af_heart", 1.2, "", "built a castle"),
              chunk_key("kokoro/torch-cuda", "of sand", "af_heart", 1.0, "", "built a castle")]
    assert len({key, *others}) == 6
    assert key.startswith("synth/chunk/{") and key.endswith("}")  # a slot of its own on a cluster


@pytest.mark.rule("chunk-cache-reuses")
async def test_a_sentence_the_ramp_cut_is_reused_as_it_was_cut_whatever_the_buffer_now(
    redis: Redis, store: CastStore
) -> None:
    text = ("When the storm passed, we walked out. The farmers went down to the fields by the river to see "
            "what the wind had left of the wheat.")
    async with running(Worker(config(), redis, StandIn(rtf=0.7))):  # a thin buffer: the long sentence is cut
        first = audio_of(await terminal(store, await submit(store, text)))
    assert len(first) > 3
    model = StandIn()  # a fast model now: the ramp would not cut, but the cache has the cut pieces
    async with running(Worker(config(), redis, model)):
        second = audio_of(await terminal(store, await submit(store, f"{text} Then it rained.")))
    assert model.calls == ["Then it rained."]
    assert [a.t for a in second[:-1]] == [a.t for a in first] and all(a.c for a in second[:-1])


def test_the_heads_of_a_chunk_are_every_cut_the_ramp_can_make() -> None:
    chunk = "The farmers went down to the fields by the river to see what the wind had left of the wheat."
    got = heads(chunk)
    assert got[0] == chunk and len(got) == len(set(got)) > 2
    assert all(chunk.startswith(h) for h in got) and [len(h) for h in got[1:]] == sorted(map(len, got[1:]))[::-1]


def test_the_cached_flag_is_in_the_header_only_when_set_and_older_records_decode() -> None:
    fresh, cached = Audio(i=1, t="Hi.", d=500, o=0, body=b"mp3"), Audio(i=1, t="Hi.", d=500, o=0, c=True, body=b"mp3")
    assert b'"c"' not in encode_headers(fresh) and b'"c":true' in encode_headers(cached)
    older = {b"e": b"audio", b"h": b'{"e":"audio","i":1,"t":"Hi.","d":500,"o":0}', b"b": b"mp3"}  # before the flag
    assert decode_fields(older) == fresh
    e, h, b = encode_fields(cached)
    assert decode_fields({b"e": e, b"h": h, b"b": b}) == cached
