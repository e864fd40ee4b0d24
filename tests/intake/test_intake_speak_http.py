"""Deepgram's REST TTS, `POST /v1/speak`, through intake's real app over real Redis: each encoding
Deepgram names that our formats make, Deepgram's headers and error shape, keys, seats and the
hang-up that cancels; a test plays the worker with real MP3 chunks (Pipecat's and LiveKit's own
clients run against the real model in tests/system/test_agent_clients.py)."""

from __future__ import annotations

import asyncio
import io
import struct
from typing import Any

import av
import numpy as np
import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

import castlog
from castlog import Audio, CastStore, Eos, LogReader, Start, content_id
from intake.claim import cache_key, key_tag
from intake.speech.formats import decode_chunk

from .conftest import MakeClient, key_names
from .test_intake_live import until_cancelled
from .test_intake_v1 import CHUNKS, K1, play_worker

Client = TestClient[Any, Any]
TEXT = "Hello there. Goodbye."
BODY = {"text": TEXT}
SPEAK = "/v1/speak"
EXACT = sum(len(decode_chunk(c)) for c in CHUNKS)  # the chunks' samples at 24 kHz


def speak_cast() -> str:
    return content_id(TEXT, "af_heart")  # aura-2-thalia-en's voice


def dg_error(body: dict[str, Any]) -> dict[str, Any]:
    assert set(body) == {"err_code", "err_msg", "request_id"} and len(body["request_id"]) == 36
    assert isinstance(body["err_msg"], str) and len(body["err_msg"]) > 10
    return body


def g711_decode(data: bytes, law: str) -> np.ndarray:
    codec = {"mulaw": "pcm_mulaw", "alaw": "pcm_alaw"}[law]
    ctx = av.CodecContext.create(codec, "r")
    ctx.sample_rate, ctx.layout = 8_000, "mono"  # type: ignore[attr-defined]
    frames = ctx.decode(av.Packet(data))  # type: ignore[attr-defined]
    return np.concatenate([f.to_ndarray().reshape(-1) for f in frames]).astype(np.float32) / 32768


def samples_of(data: bytes, encoding: str, container: str) -> tuple[np.ndarray, int]:
    """The audio as float samples, and its rate."""
    if container == "wav":
        tag, _, rate = struct.unpack("<HHI", data[20:28])
        assert data[:4] == b"RIFF" and tag == {"linear16": 1, "alaw": 6, "mulaw": 7}[encoding]
        data = data[44:]
    else:
        rate = 0
    if encoding == "linear16" and container in ("wav", "none"):
        return np.frombuffer(data, "<i2").astype(np.float32) / 32768, rate
    if encoding in ("mulaw", "alaw"):
        return g711_decode(data, encoding), rate
    with av.open(io.BytesIO(data)) as media:
        stream = media.streams.audio[0]
        pcm = np.concatenate([f.to_ndarray().reshape(-1) for f in media.decode(stream)])
        return pcm.astype(np.float32), stream.rate


@pytest.mark.parametrize(("query", "encoding", "container", "rate", "ctype"), [
    ("encoding=linear16&container=none&sample_rate=16000", "linear16", "none", 16_000, "audio/l16"),
    ("encoding=linear16&sample_rate=24000", "linear16", "wav", 24_000, "audio/wav"),
    ("encoding=mulaw&container=none", "mulaw", "none", 8_000, "audio/basic"),
    ("encoding=alaw&sample_rate=8000", "alaw", "wav", 8_000, "audio/wav"),
    ("", "mp3", "", 24_000, "audio/mpeg"),
    ("encoding=mp3&bit_rate=32000", "mp3", "", 24_000, "audio/mpeg"),
    ("encoding=opus&container=ogg", "opus", "", 48_000, "audio/ogg"),
    ("encoding=flac", "flac", "", 24_000, "audio/flac"),
    ("encoding=aac&bit_rate=48000", "aac", "", 24_000, "audio/aac"),
])
async def test_each_encoding_is_the_casts_audio_at_its_rate(
    client: Client, store: CastStore, query: str, encoding: str, container: str, rate: int, ctype: str
) -> None:
    cast_id = speak_cast()
    worker = asyncio.create_task(play_worker(store, cast_id, CHUNKS))
    resp = await client.post(f"{SPEAK}?model=aura-2-thalia-en&{query}", json=BODY)
    assert resp.status == 200, await resp.text()
    data = await resp.read()
    await worker
    assert resp.headers["Content-Type"].startswith(ctype)
    assert resp.headers["dg-model-name"] == "aura-2-thalia-en" and resp.headers["dg-model-uuid"] == "af_heart"
    assert resp.headers["dg-char-count"] == str(len(TEXT)) and len(resp.headers["dg-request-id"]) == 36
    assert resp.headers["X-Cast-Id"] == cast_id
    pcm, found = samples_of(data, encoding, container)
    assert found in (0, rate)
    want = EXACT * rate // 24_000
    slack = 2304 if encoding in ("aac", "opus", "mp3") else 64  # a lossy codec's priming and frames; a resampler's edge
    assert abs(len(pcm) - want) <= slack, (len(pcm), want)
    assert float(np.sqrt(np.mean(pcm**2))) > 0.05  # the tones (0.3 peak), not silence


async def test_the_audio_streams_as_it_is_made(client: Client, store: CastStore) -> None:
    worker = asyncio.create_task(play_worker(store, speak_cast(), CHUNKS, gap_s=0.5))
    resp = await client.post(f"{SPEAK}?encoding=linear16&container=none&sample_rate=24000", json=BODY)
    first = await resp.content.readany()
    assert first and not worker.done(), "the first chunk arrives while the cast is still being made"
    await resp.read()
    await worker


@pytest.mark.parametrize(("query", "body", "status", "err_code"), [
    ("encoding=ogg", BODY, 422, "INVALID_QUERY_PARAMETER"),
    ("encoding=linear16&container=ogg", BODY, 422, "INVALID_QUERY_PARAMETER"),
    ("encoding=opus&container=wav", BODY, 422, "INVALID_QUERY_PARAMETER"),
    ("encoding=linear16&sample_rate=4000", BODY, 422, "INVALID_QUERY_PARAMETER"),
    ("encoding=linear16&sample_rate=fast", BODY, 422, "INVALID_QUERY_PARAMETER"),
    ("encoding=mp3&sample_rate=22050", BODY, 422, "INVALID_QUERY_PARAMETER"),
    ("encoding=flac&bit_rate=48000", BODY, 422, "INVALID_QUERY_PARAMETER"),
    ("encoding=mp3&bit_rate=1", BODY, 422, "INVALID_QUERY_PARAMETER"),
    ("model=whisper-large", BODY, 422, "UNKNOWN_VOICE"),
    ("speed=9", BODY, 422, "INVALID_QUERY_PARAMETER"),
    ("", {"text": 5}, 422, "INVALID_FIELD"),
    ("", {"words": "Hi."}, 422, "INVALID_FIELD"),
    ("", {"text": "   "}, 422, "EMPTY_TEXT"),
    ("", b"{not json", 400, "MALFORMED_JSON"),
    ("", b"Hello.", 415, "UNSUPPORTED_MEDIA_TYPE"),
])
async def test_a_refusal_is_deepgrams_error_and_leaves_no_key(
    client: Client, redis: Redis, query: str, body: Any, status: int, err_code: str
) -> None:
    if isinstance(body, bytes):
        ctype = "text/plain" if err_code == "UNSUPPORTED_MEDIA_TYPE" else "application/json"
        resp = await client.post(f"{SPEAK}?{query}", data=body, headers={"Content-Type": ctype})
    else:
        resp = await client.post(f"{SPEAK}?{query}", json=body)
    assert resp.status == status, await resp.text()
    error = dg_error(await resp.json())
    assert error["err_code"] == err_code and resp.headers["dg-request-id"] == error["request_id"]
    assert await key_names(redis) == set()


async def test_keys_want_deepgrams_token_scheme(make_client: MakeClient, store: CastStore, redis: Redis) -> None:
    client = await make_client(api_keys=frozenset({K1}))
    resp = await client.post(SPEAK, json=BODY)
    assert resp.status == 401 and dg_error(await resp.json())["err_code"] == "INVALID_AUTH"
    assert await key_names(redis) == set()
    own = content_id(TEXT, "af_heart", key=cache_key(b"", key_tag(K1, b"")))  # the key's tenant's cache
    worker = asyncio.create_task(play_worker(store, own, CHUNKS))
    resp = await client.post(SPEAK, json=BODY, headers={"Authorization": f"Token {K1}"})
    assert resp.status == 200 and await resp.read()
    await worker


async def test_speak_holds_a_speech_streams_seat(make_client: MakeClient, store: CastStore) -> None:
    client = await make_client(speech_streams_per_client=1)
    cast_id = speak_cast()
    first = asyncio.create_task(client.post(SPEAK, json=BODY))
    while not await store.redis.exists("rl/intake-speech/127.0.0.1"):
        await asyncio.sleep(0.01)
    resp = await client.post(SPEAK, json={"text": "Another one."})
    assert resp.status == 429 and dg_error(await resp.json())["err_code"] == "TOO_MANY_STREAMS"
    await play_worker(store, cast_id, CHUNKS)
    assert (await first).status == 200


async def first_sentence(store: CastStore, cast_id: str) -> int:
    """What a worker appends once the cast is claimed: its start and first sentence; the tail."""
    while await LogReader(store.redis).tail(cast_id) == 0:
        await asyncio.sleep(0.01)
    tail = await store.append(cast_id, 1, [Start(attempt=1, resume_from=0, at=0)])
    return await store.append(cast_id, tail, [Audio(i=0, t="chunk 0", d=700, o=0, body=CHUNKS[0])])


async def test_a_client_that_hangs_up_cancels_the_cast_it_made(client: Client, store: CastStore, redis: Redis) -> None:
    cast_id = speak_cast()
    posted = asyncio.create_task(client.post(f"{SPEAK}?encoding=linear16&container=none", json=BODY))
    tail = await first_sentence(store, cast_id)
    resp = await posted
    assert await resp.content.readany()
    resp.close()  # the client leaves (a barge-in)
    for i in range(1, 50):  # the worker goes on until a write finds the client gone
        tail = await store.append(cast_id, tail, [Audio(i=i, t=f"chunk {i}", d=700, o=700 * i, body=CHUNKS[0])])
        if await castlog.is_cancelled(redis, cast_id):
            break
        await asyncio.sleep(0.05)
    assert await until_cancelled(redis, cast_id)


async def test_a_client_that_joined_anothers_cast_leaves_it_be(client: Client, store: CastStore, redis: Redis) -> None:
    cast_id = speak_cast()
    first = asyncio.create_task(client.post(f"{SPEAK}?encoding=linear16&container=none", json=BODY))
    tail = await first_sentence(store, cast_id)
    joined = await client.post(f"{SPEAK}?encoding=mulaw&container=none", json=BODY)  # the same text: the same cast
    assert await joined.content.readany() and await (await first).content.readany()
    joined.close()
    await asyncio.sleep(0.2)  # the joined stream's write finds it gone on the next chunk
    await store.append(cast_id, tail, [Audio(i=1, t="chunk 1", d=900, o=700, body=CHUNKS[1]),
                                       Eos(sentences=2, audio_ms=1600, attempts=1)])
    assert len(await (await first).read()) > 0 and not await castlog.is_cancelled(redis, cast_id)


async def test_the_websocket_upgrade_stays_on_the_same_path(client: Client) -> None:
    ws = await client.ws_connect(f"{SPEAK}?model=aura-2-thalia-en&encoding=linear16&sample_rate=16000")
    assert (await ws.receive_json())["type"] == "Metadata"
    await ws.close()
