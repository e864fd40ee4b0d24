"""The Wyoming server (Home Assistant's protocol) driven by the `wyoming` package's own client:
`describe` -> `info` with BCP-47 languages and streaming, a one-shot `synthesize`, and a
streaming request (start, chunks, the back-compatible `synthesize`, stop), each a live cast.
A test plays the worker with real MP3 chunks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
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
from .test_intake_live import worker_writes
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
        jobs = await castlog.read_jobs(redis, castlog.JOBS_LIVE)
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


async def test_one_shot_synthesize_is_a_cast_read_out_per_sentence(port: int, redis: Redis) -> None:
    async with wyoming_client.AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=TEXT, voice=SynthesizeVoice(name="af_heart")).event())
        cast_id = await _cast_opened(redis)
        await worker_writes(CastStore(redis), cast_id, [("Hello there.", CHUNKS[0]), ("Goodbye.", CHUNKS[1])],
                            end=True)
        sentences = await _sentences(client, "audio-stop")
        sentences += await _sentences(client, "audio-stop")
    assert [len(s) // 2 for s in sentences] == [len(decode_chunk(c)) for c in CHUNKS]
    assert (await castlog.LiveStore(redis).read_text(cast_id)).text == TEXT  # type: ignore[union-attr]


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
        assert len(await castlog.read_jobs(redis, castlog.JOBS_LIVE)) == 1, "no second cast was opened"


async def test_a_client_that_leaves_mid_stream_cancels_its_cast(port: int, redis: Redis) -> None:
    async with wyoming_client.AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(SynthesizeStart().event())
        await client.write_event(SynthesizeChunk(text="Never mind. ").event())
        cast_id = await _cast_opened(redis)
    for _ in range(100):
        if await castlog.is_cancelled(redis, cast_id):
            break
        await asyncio.sleep(0.02)
    assert await castlog.is_cancelled(redis, cast_id)
