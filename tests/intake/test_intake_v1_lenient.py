"""A lenient, drop-in `/v1/audio/speech`: OpenAI's and Kokoro-FastAPI's fields accepted (and
honoured where they mean something), unknown ones named in a header, voice blends as voices of
their own; `/api/casts` stays strict. A test plays the worker (tests/intake/test_intake_v1.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from castlog import CastStore, LogReader, canonical_voice, content_id
from intake.speech.formats import decode_chunk
from intake.speech.v1 import OPENAI_VOICES, resolve_voice

from .conftest import key_names
from .test_intake_v1 import CHUNKS, SPEECH, play_worker

Client = TestClient[Any, Any]
OPENAI_NAMES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse",
                "cedar", "marin")
ENGLISH = ("af_alloy", "af_bella", "af_heart", "af_kore", "af_nicole", "af_nova", "af_sarah", "af_sky", "am_adam",
           "am_echo", "am_fenrir", "am_liam", "am_michael", "am_onyx", "am_puck", "bf_emma", "bm_fable", "bm_george",
           "bm_lewis")


async def _speak(client: Client, store: CastStore, voice: str = "jf_alpha", **fields: Any) -> Any:
    """One request while a stand-in worker plays the cast; the response, read."""
    cast_id = content_id(SPEECH["input"], canonical_voice(voice))
    played = await LogReader(store.redis).tail(cast_id) > 0  # a repeat replays the log
    worker = asyncio.create_task(asyncio.sleep(0) if played else play_worker(store, cast_id, CHUNKS))
    resp = await client.post("/v1/audio/speech", json={**SPEECH, "voice": voice, **fields})
    body = await resp.read()
    await worker
    return resp, body


def test_every_openai_voice_name_maps_to_an_english_voice() -> None:
    assert set(OPENAI_VOICES) == set(OPENAI_NAMES)
    for name in OPENAI_NAMES:
        assert resolve_voice(name, ENGLISH)[:1] in "ab"
        assert resolve_voice(name.upper(), ENGLISH) == resolve_voice(name, ENGLISH)


def test_lang_code_picks_a_voice_of_that_language_for_an_openai_name() -> None:
    assert resolve_voice("nova", ENGLISH, "b") == "bf_emma"
    assert resolve_voice("onyx", ENGLISH, "b") in ("bm_fable", "bm_george", "bm_lewis")
    assert resolve_voice("nova", ENGLISH, "a") == "af_nova"
    assert resolve_voice("af_heart", ENGLISH, "b") == "af_heart", "a voice id is taken as named"


def test_a_blend_has_one_canonical_name_whatever_its_spelling() -> None:
    names = {canonical_voice(v) for v in ("af_bella(2)+af_sky(1)", "af_sky+af_bella(2)", "af_bella(4)+af_sky(2)")}
    assert names == {"af_bella(0.667)+af_sky(0.333)"}
    assert canonical_voice("af_heart(3)") == "af_heart"
    assert resolve_voice("nova(2)+af_sky", ENGLISH) == "af_nova(0.667)+af_sky(0.333)"


async def test_instructions_and_unknown_fields_are_accepted_and_named_in_headers(
    client: Client, store: CastStore
) -> None:
    resp, body = await _speak(client, store, instructions="Speak like a pirate.", temperature=0.3,
                              normalization_options={"normalize": False}, zz_top=1)
    assert resp.status == 200 and body == b"".join(CHUNKS)
    assert resp.headers["X-Ignored-Fields"] == "instructions, normalization_options"
    assert resp.headers["X-Unknown-Fields"] == "temperature, zz_top"


async def test_api_casts_stays_strict(client: Client, redis: Redis) -> None:
    resp = await client.post("/api/casts", json={"text": "Hi.", "instructions": "loud"})
    assert resp.status == 422 and await key_names(redis) == set()


async def test_stream_false_answers_one_whole_file_with_its_length(client: Client, store: CastStore) -> None:
    resp, body = await _speak(client, store, stream=False, return_download_link=True)
    assert resp.status == 200 and body == b"".join(CHUNKS)
    assert int(resp.headers["Content-Length"]) == len(body)
    cast_id = resp.headers["X-Cast-Id"]
    assert resp.headers["X-Download-Path"] == f"/api/casts/{cast_id}/audio.mp3"
    resp, body = await _speak(client, store, stream=False, response_format="wav")
    assert body[:4] == b"RIFF" and int.from_bytes(body[40:44], "little") == len(body) - 44


@pytest.mark.parametrize("fmt", ["pcm", "mp3"])
async def test_volume_multiplier_scales_the_samples(client: Client, store: CastStore, fmt: str) -> None:
    _, plain = await _speak(client, store, response_format="pcm")
    _, half = await _speak(client, store, response_format=fmt, volume_multiplier=0.5)
    loud = np.abs(np.frombuffer(plain, "<i2").astype(np.float64)).mean()
    soft = half if fmt == "pcm" else b""
    level = (np.abs(np.frombuffer(soft, "<i2").astype(np.float64)).mean() if soft
             else np.abs(decode_chunk(half) * 32767).mean())
    assert level == pytest.approx(loud / 2, rel=0.1)


@pytest.mark.rule("blend-is-a-voice")
async def test_a_blend_is_a_cast_of_its_own_voice(client: Client, store: CastStore) -> None:
    resp, body = await _speak(client, store, voice="jf_alpha(1)+af_heart(2)")
    assert resp.status == 200 and body == b"".join(CHUNKS)
    blend = "af_heart(0.667)+jf_alpha(0.333)"
    assert resp.headers["X-Cast-Id"] == content_id(SPEECH["input"], blend) != content_id(SPEECH["input"], "af_heart")
    resp, _ = await _speak(client, store, voice="af_heart(4)+jf_alpha(2)")
    assert resp.headers["X-Cast-Id"] == content_id(SPEECH["input"], blend), "the same mix is the same cast"
    listed = (await (await client.get("/v1/audio/voices")).json())["voices"]
    assert {"id": blend, "name": f"{blend} (blend)"} in listed, "a blend is listed once used"
