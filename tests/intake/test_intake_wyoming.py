"""The Wyoming server (Home Assistant's protocol) driven by the `wyoming` package's own client:
`describe` -> `info` with BCP-47 languages and streaming, a one-shot `synthesize`, and a
streaming request (start, chunks, the back-compatible `synthesize`, stop), each a live cast.
A test plays the worker with real MP3 chunks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from jobstreams import read_jobs
from redis.asyncio import Redis
from wyoming import client as wyoming_client
from wyoming.audio import AudioChunk
from wyoming.error import Error as WyomingError
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

import castlog
from castlog import CastStore
from intake.speech.formats import decode_chunk
from streamtts.redisserver import free_port

from .conftest import PUBLISHED_VOICES, MakeClient
from .test_intake_live import until_cancelled, worker_writes
from .test_intake_v1 import CHUNKS

Client = TestClient[Any, Any]
TEXT = "Hello there. Goodbye."


@pytest.fixture
async def port(make_client: MakeClient) -> int:
    chosen = free_port()
    await make_client(wyoming_port=chosen)
    return chosen


async def _cast_opened(redis: Redis) -> str:
    for _ in range(200):
        jobs = await read_jobs(redis, castlog.JOBS_LIVE)
        if jobs:
            return jobs[-1].id
        await asyncio.sleep(0.02)
    raise AssertionError("no cast was opened")


async def _sentences(client: Any, until: str) -> list[bytes]:
    """The audio of each audio-start..audio-stop, until an event of type ``until``."""
    out: list[bytes] = []
    while (event := await asyncio.wait_for(client.read_event(), 10)) is not None:
        if event.type == "audio-start":
            out.append(b"")
        elif AudioChunk.is_type(event.type):
            chunk = AudioChunk.from_event(event)
            assert (chunk.rate, chunk.width, chunk.channels) == (24_000, 2, 1)
            out[-1] += chunk.audio
        elif event.type == until:
            return out
    raise AssertionError("the server hung up")


async def test_describe_lists_every_voice_with_its_bcp47_language_and_streaming(port: int) -> None:
    async with wyoming_client.AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Describe().event())
        info = Info.from_event(await asyncio.wait_for(client.read_event(), 10))
    [program] = info.tts
    assert program.supports_synthesize_streaming and program.attribution.name == "hexgrad"
    languages = {v.name: v.languages for v in program.voices}
    assert set(languages) == set(PUBLISHED_VOICES)
    assert languages["af_heart"] == ["en-US"] and languages["jf_alpha"] == ["ja"]


async def _read_as_home_assistant_did(client: Any) -> tuple[int, bytes]:
    """Home Assistant's pre-streaming read of a one-shot: every chunk until the first audio-stop
    (then it hangs up). The audio-starts seen, and the PCM."""
    starts, audio = 0, b""
    while (event := await asyncio.wait_for(client.read_event(), 10)) is not None:
        if event.type == "audio-start":
            starts += 1
        elif AudioChunk.is_type(event.type):
            chunk = AudioChunk.from_event(event)
            assert (chunk.rate, chunk.width, chunk.channels) == (24_000, 2, 1)
            audio += chunk.audio
        elif event.type == "audio-stop":
            return starts, audio
    raise AssertionError("the server hung up")


async def test_a_one_shot_is_one_audio_group_whole_for_a_client_that_stops_at_audio_stop(
    port: int, redis: Redis
) -> None:
    samples = [len(decode_chunk(c)) for c in CHUNKS]
    audio_ms = sum(samples) * 1000 // 24_000
    async with wyoming_client.AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=TEXT, voice=SynthesizeVoice(name="af_heart")).event())
        cast_id = await _cast_opened(redis)
        reading = asyncio.ensure_future(_read_as_home_assistant_did(client))
        await worker_writes(CastStore(redis), cast_id, [("Hello there.", CHUNKS[0])], end=False)
        await worker_writes(CastStore(redis), cast_id, [("Goodbye.", CHUNKS[1])], end=True, audio_ms=audio_ms)
        starts, audio = await reading
    assert starts == 1, "one audio-start .. audio-stop group for the whole answer"
    assert len(audio) // 2 == sum(samples) and len(audio) // 48 == audio_ms  # the whole answer: eos's audio_ms
    assert (await castlog.LiveStore(redis).read_text(cast_id)).text == TEXT  # type: ignore[union-attr]
    assert not await castlog.is_cancelled(redis, cast_id), "a client that heard it all cancels nothing"


async def test_a_streaming_request_feeds_one_cast_and_ends_with_synthesize_stopped(port: int, redis: Redis) -> None:
    async with wyoming_client.AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(language="en-US")).event())
        for piece in ("Hello ", "there. ", "Goodbye."):  # as the LLM writes it
            await client.write_event(SynthesizeChunk(text=piece).event())
        await client.write_event(Synthesize(text=TEXT).event())  # the copy for older servers: ignored
        cast_id = await _cast_opened(redis)
        await worker_writes(CastStore(redis), cast_id, [("Hello there.", CHUNKS[0])], end=False)
        await client.write_event(SynthesizeStop().event())
        await asyncio.sleep(0.1)
        await worker_writes(CastStore(redis), cast_id, [("Goodbye.", CHUNKS[1])], end=True)
        sentences = await _sentences(client, SynthesizeStopped().event().type)
    assert len(sentences) == 2
    text = await castlog.LiveStore(redis).read_text(cast_id)
    assert text is not None and text.text == TEXT and text.voice == "af_heart" and text.closed is not None


async def test_a_second_start_inside_a_streaming_request_is_refused(port: int, redis: Redis) -> None:
    async with wyoming_client.AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(SynthesizeStart().event())
        await _cast_opened(redis)
        await client.write_event(SynthesizeStart().event())
        event = await asyncio.wait_for(client.read_event(), 10)
        assert event is not None and WyomingError.is_type(event.type)
        assert WyomingError.from_event(event).code == "request_open"
        assert len(await read_jobs(redis, castlog.JOBS_LIVE)) == 1, "no second cast was opened"


async def test_a_client_that_leaves_mid_stream_cancels_its_cast(port: int, redis: Redis) -> None:
    async with wyoming_client.AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(SynthesizeStart().event())
        await client.write_event(SynthesizeChunk(text="Never mind. ").event())
        cast_id = await _cast_opened(redis)
    assert await until_cancelled(redis, cast_id)


async def test_a_client_that_leaves_during_a_one_shots_answer_cancels_its_cast(port: int, redis: Redis) -> None:
    async with wyoming_client.AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=TEXT).event())
        cast_id = await _cast_opened(redis)
        await worker_writes(CastStore(redis), cast_id, [("Hello there.", CHUNKS[0])], end=False)
        while (event := await asyncio.wait_for(client.read_event(), 10)) is not None:
            if AudioChunk.is_type(event.type):
                break  # the first sentence heard: the user walks away
    assert await until_cancelled(redis, cast_id)
    text = await castlog.LiveStore(redis).read_text(cast_id)
    assert text is not None and text.closed is not None


async def test_a_client_that_leaves_after_synthesize_stop_cancels_what_is_not_yet_spoken(
    port: int, redis: Redis
) -> None:
    async with wyoming_client.AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(SynthesizeStart().event())
        await client.write_event(SynthesizeChunk(text=TEXT).event())
        await client.write_event(SynthesizeStop().event())
        cast_id = await _cast_opened(redis)
        for _ in range(100):  # the stop is taken: the text closed
            text = await castlog.LiveStore(redis).read_text(cast_id)
            if text is not None and text.closed is not None:
                break
            await asyncio.sleep(0.02)
    assert await until_cancelled(redis, cast_id)


async def test_a_client_that_leaves_before_its_one_shot_is_read_cancels_it(port: int, redis: Redis) -> None:
    async with wyoming_client.AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=TEXT).event())
        cast_id = await _cast_opened(redis)
    assert await until_cancelled(redis, cast_id)


async def test_a_refused_text_ends_its_request_and_leaves_no_open_cast(make_client: MakeClient, redis: Redis) -> None:
    port = free_port()
    await make_client(wyoming_port=port, max_chars=len(TEXT) - 1)
    async with wyoming_client.AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=TEXT).event())  # longer than a cast may be
        event = await asyncio.wait_for(client.read_event(), 10)
        assert event is not None and WyomingError.is_type(event.type)
        assert WyomingError.from_event(event).code == "text_too_long"
        cast_id = await _cast_opened(redis)
        text = await castlog.LiveStore(redis).read_text(cast_id)
        assert text is not None and text.closed is not None, "the refused request's cast is not left open"
        assert await castlog.is_cancelled(redis, cast_id)
        await client.write_event(Describe().event())  # the connection goes on
        event = await asyncio.wait_for(client.read_event(), 10)
        assert event is not None and Info.is_type(event.type)
