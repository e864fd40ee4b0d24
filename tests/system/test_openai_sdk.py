"""The official OpenAI SDK against the real system (intake, synth with the real model, edge).

Every format streams to a file and decodes to the cast's exact duration; speed makes another
cast; an unknown voice is a clean OpenAI error; a repeat is served from the log.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path

import av
import numpy as np
import openai
import pytest
from aiohttp import ClientSession
from redis import Redis

from tests.support.system import System

pytestmark = [pytest.mark.model, pytest.mark.timeout(300)]

TEXT = "Streaming speech is here. It plays while it is made."
AAC_FRAME = 1024  # samples: ADTS cannot say where the last frame's padding starts


@pytest.fixture
async def sdk(system: System) -> AsyncIterator[openai.AsyncOpenAI]:
    """A client per test: its connection pool belongs to the test's event loop."""
    client = openai.AsyncOpenAI(base_url=system.url("intake", "/v1"), api_key="not-needed", max_retries=0)
    yield client
    await client.close()


async def _default_voice(system: System) -> str:
    async with ClientSession() as http, http.get(system.url("intake", "/v1/audio/voices")) as response:
        assert response.status == 200
        return str((await response.json())["default"])


async def _state(system: System, cast_id: str) -> dict:
    async with ClientSession() as http, http.get(system.url("edge", f"/api/casts/{cast_id}")) as response:
        assert response.status == 200
        return dict(await response.json())


async def _speak(sdk: openai.AsyncOpenAI, path: Path, **params: object) -> str:
    """Stream one response to ``path``; the cast id it names."""
    async with sdk.audio.speech.with_streaming_response.create(model="tts-1", **params) as response:  # type: ignore[arg-type]
        assert response.headers["Location"] == f"/c/{response.headers['X-Cast-Id']}"
        await response.stream_to_file(path)
        return response.headers["X-Cast-Id"]


def _samples(data: bytes, fmt: str) -> int:
    """Samples at 24 kHz that a decoder gets from ``data`` (PyAV)."""
    if fmt == "pcm":
        return len(data) // 2
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        decoded = sum(frame.samples for frame in container.decode(stream))
        return decoded * 24_000 // stream.rate


@pytest.mark.rule("formats-exact")
async def test_every_format_streams_to_a_file_with_the_casts_duration(
    system: System, sdk: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    voice = await _default_voice(system)
    ids, sizes = set(), {}
    for fmt in ("mp3", "pcm", "wav", "flac", "opus", "aac"):
        path = tmp_path / f"speech.{fmt}"
        ids.add(await _speak(sdk, path, voice=voice, input=TEXT, response_format=fmt))
        sizes[fmt] = _samples(path.read_bytes(), fmt)
    assert len(ids) == 1, "one cast behind every format"
    state = await _state(system, ids.pop())
    exact = state["audio_ms"] * 24
    assert state["status"] == "done" and exact > 0
    for fmt in ("mp3", "pcm", "wav", "flac", "opus"):
        assert sizes[fmt] == exact, f"{fmt}: {sizes[fmt]} samples, the cast has {exact}"
    assert 0 <= sizes["aac"] - exact < AAC_FRAME
    pcm = np.frombuffer((tmp_path / "speech.pcm").read_bytes(), "<i2")
    assert np.abs(pcm).max() > 1000, "speech, not silence"


@pytest.mark.rule("repeat-is-cache-hit", "v1-is-a-submit")
async def test_a_repeat_is_served_from_the_log_with_the_same_bytes(
    system: System, sdk: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    voice = await _default_voice(system)
    text = "A repeat costs no synthesis."
    first = await _speak(sdk, tmp_path / "a.mp3", voice=voice, input=text)
    jobs = Redis.from_url(system.redis.url).xlen("jobs")
    second = await _speak(sdk, tmp_path / "b.mp3", voice=voice, input=text)
    assert first == second
    assert Redis.from_url(system.redis.url).xlen("jobs") == jobs, "no second job"
    assert (tmp_path / "a.mp3").read_bytes() == (tmp_path / "b.mp3").read_bytes()


@pytest.mark.rule("speed-in-id")
async def test_speed_makes_its_own_shorter_cast(system: System, sdk: openai.AsyncOpenAI, tmp_path: Path) -> None:
    voice = await _default_voice(system)
    text = "Faster, please."
    normal = await _speak(sdk, tmp_path / "n.wav", voice=voice, input=text, response_format="wav")
    fast = await _speak(sdk, tmp_path / "f.wav", voice=voice, input=text, response_format="wav", speed=1.6)
    assert normal != fast
    normal_state, fast_state = await _state(system, normal), await _state(system, fast)
    assert normal_state["speed"] == 1.0 and fast_state["speed"] == 1.6
    assert fast_state["audio_ms"] < 0.85 * normal_state["audio_ms"]


async def test_an_unknown_voice_is_an_openai_shaped_error(system: System, sdk: openai.AsyncOpenAI) -> None:
    casts = len(Redis.from_url(system.redis.url).keys("pub/casts/*"))
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        await sdk.audio.speech.create(model="tts-1", voice="no_such_voice", input="Hello.")
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "unknown_voice" and error["param"] == "voice" and error["type"] == "invalid_request_error"
    assert len(Redis.from_url(system.redis.url).keys("pub/casts/*")) == casts, "no trace in Redis"


async def test_sse_stream_carries_the_audio_as_deltas(system: System, sdk: openai.AsyncOpenAI) -> None:
    import base64
    import json

    voice = await _default_voice(system)
    events = []
    async with sdk.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice=voice, input=TEXT, response_format="pcm", stream_format="sse",
        extra_body={"timestamps": True},
    ) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        async for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1)
    assert events[-1]["type"] == "speech.audio.done"
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    state = await _state(system, response.headers["X-Cast-Id"])
    assert len(pcm) // 2 == state["audio_ms"] * 24
    words = [w for e in events[:-1] for w in e["words"]]
    assert [w["word"] for w in words] == TEXT.replace(".", "").split()
    assert all(0 <= w["start"] < w["end"] <= state["audio_ms"] / 1000 for w in words)
    assert [w["start"] for w in words] == sorted(w["start"] for w in words)
    async with ClientSession() as http:
        async with http.get(system.url("edge", f"/api/casts/{state['id']}/captions")) as captions:
            vtt = await captions.text()
    assert vtt.startswith("WEBVTT") and "\nStreaming speech is here.\n" in vtt and "\nmade\n" in vtt


@pytest.mark.rule("blend-is-a-voice")
async def test_the_sdk_drives_a_lenient_request_with_kokoro_fastapis_fields_and_a_blend(
    system: System, sdk: openai.AsyncOpenAI
) -> None:
    text = "A **blended** voice, read as one file."
    response = await sdk.audio.speech.with_raw_response.create(
        model="gpt-4o-mini-tts", voice="af_heart(2)+af_bella(1)", input=text, response_format="wav",
        instructions="Speak cheerfully.",
        extra_body={"stream": False, "volume_multiplier": 0.8, "return_download_link": True, "lang_code": "a",
                    "normalization_options": {"normalize": True}, "seed": 7},
    )
    body = response.content
    cast_id = response.headers["X-Cast-Id"]
    assert int(response.headers["Content-Length"]) == len(body) and body[:4] == b"RIFF"
    assert response.headers["X-Ignored-Fields"] == "instructions, normalization_options"
    assert response.headers["X-Unknown-Fields"] == "seed"
    assert response.headers["X-Download-Path"] == f"/api/casts/{cast_id}/audio.mp3"
    state = await _state(system, cast_id)
    assert state["voice"] == "af_heart(0.667)+af_bella(0.333)" and state["status"] == "done"
    assert (len(body) - 44) // 2 == state["audio_ms"] * 24
    async with ClientSession() as http, http.get(system.url("edge", f"/api/casts/{cast_id}/audio.mp3")) as got:
        assert got.status == 200 and len(await got.read()) > 1000
    for name in ("ash", "ballad", "cedar", "marin"):  # OpenAI's newer names, each an English voice
        async with sdk.audio.speech.with_streaming_response.create(
            model="tts-1", voice=name, input="Hi.", response_format="pcm"  # type: ignore[arg-type]
        ) as named:
            assert len(await named.read()) > 0
