"""Agents' and Home Assistant's protocols end to end (intake, synth with the real model, edge):
the `wyoming` package's client drives a streaming request as Home Assistant does, and a
Deepgram-protocol client (aiohttp, the messages exactly as Deepgram documents them) speaks two
turns and hears them back through Whisper."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import listening
import numpy as np
import pytest
from aiohttp import ClientSession, ClientTimeout
from jobstreams import read_jobs
from redis.asyncio import Redis
from wyoming.audio import AudioChunk
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

import castlog
from castlog import LogReader
from tests.support.system import System

pytestmark = [pytest.mark.model, pytest.mark.timeout(400)]

ANSWER = "The **kitchen lights** are now on. Anything else?"


def wyoming_port(system: System) -> int:
    return int(system.env["INTAKE_WYOMING_PORT"])


async def test_home_assistants_streaming_request_is_spoken_per_sentence(system: System) -> None:
    async with AsyncTcpClient("127.0.0.1", wyoming_port(system)) as client:
        await client.write_event(Describe().event())
        info = Info.from_event(await asyncio.wait_for(client.read_event(), 10))
        languages = {v.name: v.languages for v in info.tts[0].voices}
        assert languages["af_heart"] == ["en-US"] and languages["bf_emma"] == ["en-GB"]
        assert info.tts[0].supports_synthesize_streaming
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="af_heart")).event())
        for word in ANSWER.split(" "):  # as the LLM writes it
            await client.write_event(SynthesizeChunk(text=word + " ").event())
        await client.write_event(Synthesize(text=ANSWER).event())  # the copy for older servers
        await client.write_event(SynthesizeStop().event())
        sentences: list[bytes] = []
        while (event := await asyncio.wait_for(client.read_event(), 300)) is not None:
            if event.type == "audio-start":
                sentences.append(b"")
            elif AudioChunk.is_type(event.type):
                sentences[-1] += AudioChunk.from_event(event).audio
            elif event.type == "synthesize-stopped":
                break
    assert len(sentences) >= 2 and all(len(s) > 4_800 for s in sentences)  # audio per sentence (or clause)
    heard = listening.transcribe(np.frombuffer(b"".join(sentences), "<i2").astype(np.float32) / 32768)
    assert listening.wer("The kitchen lights are now on. Anything else?", heard) <= 0.15, heard
    assert "*" not in heard


async def test_home_assistants_one_shot_read_to_the_first_audio_stop_is_the_whole_answer(system: System) -> None:
    """Home Assistant before 2025.7 (and every non-streaming client) sends one `synthesize` and
    plays what comes up to the first `audio-stop`: that must be the whole answer, as long as the
    cast's own `eos` says it is."""
    async with AsyncTcpClient("127.0.0.1", wyoming_port(system)) as client:
        await client.write_event(Synthesize(text=ANSWER, voice=SynthesizeVoice(name="af_heart")).event())
        starts, audio = 0, b""
        while (event := await asyncio.wait_for(client.read_event(), 300)) is not None:
            if event.type == "audio-start":
                starts += 1
            elif AudioChunk.is_type(event.type):
                audio += AudioChunk.from_event(event).audio
            elif event.type == "audio-stop":
                break
    redis = Redis.from_url(system.redis.url)
    try:
        jobs = await read_jobs(redis, castlog.JOBS_LIVE)  # this request's cast is the newest
        last = (await LogReader(redis).read(jobs[-1].id, 0, 1000))[-1].record
    finally:
        await redis.aclose()
    assert starts == 1 and isinstance(last, castlog.Eos) and not last.cancelled
    assert abs(len(audio) // 48 - last.audio_ms) <= 50, (len(audio) // 48, last.audio_ms)  # 24 kHz s16le: 48 B/ms
    heard = listening.transcribe(np.frombuffer(audio, "<i2").astype(np.float32) / 32768)
    assert listening.wer("The kitchen lights are now on. Anything else?", heard) <= 0.15, heard


async def test_a_deepgram_client_speaks_two_turns_each_a_cast(system: System) -> None:
    url = system.url("intake", "/v1/speak?model=aura-2-thalia-en&encoding=linear16&sample_rate=16000")
    turns = ["Hello from the first turn.", "And this is the second one."]
    heard_turns = []
    async with ClientSession(timeout=ClientTimeout(total=350)) as http:
        ws = await http.ws_connect(url)
        metadata = json.loads((await ws.receive()).data)
        assert metadata["type"] == "Metadata"
        for n, turn in enumerate(turns):
            for word in turn.split(" "):
                await ws.send_json({"type": "Speak", "text": word + " "})
            await ws.send_json({"type": "Flush"})
            audio = b""
            while True:
                msg = await ws.receive()
                if msg.type == aiohttp.WSMsgType.BINARY:
                    audio += msg.data
                    continue
                event = json.loads(msg.data)
                if event["type"] == "Flushed":
                    assert event["sequence_id"] == n
                    break
            heard_turns.append(listening.transcribe(np.frombuffer(audio, "<i2").astype(np.float32) / 32768, 16_000))
        await ws.send_json({"type": "Close"})
        await ws.receive()
    for turn, heard in zip(turns, heard_turns):
        assert listening.wer(turn, heard) <= 0.2, heard
