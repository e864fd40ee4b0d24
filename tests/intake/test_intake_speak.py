"""The Deepgram-compatible `/v1/speak` WebSocket, driven with the protocol exactly as Deepgram
documents it (Speak, Flush, Clear, Close; Metadata, binary audio, Flushed, Cleared, Warning)
through intake's real app over real Redis; a test plays the worker with real MP3 chunks."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import msgspec
import numpy as np
import pytest
from aiohttp.test_utils import TestClient
from jobstreams import read_jobs
from redis.asyncio import Redis

import castlog
from castlog import CastStore
from intake.context import INTAKE
from intake.speech.formats import decode_chunk
from intake.speech.speak import voice_of

from .conftest import MakeClient
from .test_intake_live import until_cancelled, worker_writes
from .test_intake_v1 import CHUNKS

Client = TestClient[Any, Any]
SPEAK = "/v1/speak?model=aura-2-thalia-en&encoding={encoding}&sample_rate={rate}"


async def _next_cast(redis: Redis, seen: set[str]) -> str:
    """The id of the next open cast a session opened (its job in its lane's jobs/live)."""
    for _ in range(200):
        for job in await read_jobs(redis, castlog.JOBS_LIVE):
            cast_id = job.id
            if cast_id not in seen:
                seen.add(cast_id)
                return cast_id
        await asyncio.sleep(0.02)
    raise AssertionError("no cast was opened")


async def _until_flushed(ws: aiohttp.ClientWebSocketResponse) -> tuple[bytes, dict[str, Any]]:
    audio = b""
    while True:
        msg = await asyncio.wait_for(ws.receive(), 10)
        if msg.type == aiohttp.WSMsgType.BINARY:
            audio += msg.data
            continue
        event = msgspec.json.decode(msg.data)
        if event["type"] == "Flushed":
            return audio, event


def test_aura_names_map_to_english_voices() -> None:
    installed = ("af_heart", "am_michael", "bf_emma", "bm_george", "jf_alpha")
    assert voice_of("aura-asteria-en", installed, "jf_alpha") == "af_heart"
    assert voice_of("aura-2-orion-en", installed, "jf_alpha") == "am_michael"
    assert voice_of("aura-helios-en", installed, "jf_alpha") == "bm_george"
    assert voice_of("jf_alpha", installed, "af_heart") == "jf_alpha"
    assert voice_of(None, installed, "af_heart") == "af_heart"


@pytest.mark.parametrize(("encoding", "rate", "width"), [("linear16", 16_000, 2), ("mulaw", 8_000, 1),
                                                         ("alaw", 48_000, 1)])
async def test_each_flushed_turn_is_a_cast_whose_audio_comes_before_flushed(
    client: Client, redis: Redis, encoding: str, rate: int, width: int
) -> None:
    store, seen = CastStore(redis), set[str]()
    ws = await client.ws_connect(SPEAK.format(encoding=encoding, rate=rate))
    metadata = msgspec.json.decode((await ws.receive()).data)
    assert metadata["type"] == "Metadata" and metadata["model_name"] == "aura-2-thalia-en"
    assert metadata["model_uuid"] == "af_heart" and metadata["request_id"]
    for turn in range(2):
        await ws.send_json({"type": "Speak", "text": "Hello there. "})
        await ws.send_json({"type": "Speak", "text": "How are you?"})
        await ws.send_json({"type": "Flush"})
        cast_id = await _next_cast(redis, seen)
        await asyncio.sleep(0.1)
        text = await CastStore(redis).redis.xrange(castlog.catalog_key(cast_id))
        assert b"".join(f.get(b"t", b"") for _, f in text) == b"Hello there. How are you?"
        await worker_writes(store, cast_id, [("Hello there.", CHUNKS[0]), ("How are you?", CHUNKS[1])], end=True)
        audio, flushed = await _until_flushed(ws)
        assert flushed == {"type": "Flushed", "sequence_id": turn}
        samples = sum(len(decode_chunk(c)) for c in CHUNKS) * rate // 24_000
        assert abs(len(audio) // width - samples) <= rate // 100  # within 10 ms: the resampler's edges
    if encoding == "linear16":
        pcm = np.frombuffer(audio, "<i2")
        assert np.abs(pcm).max() > 3000, "the tone, not silence"
    await ws.send_json({"type": "Close"})
    assert (await ws.receive()).type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)


@pytest.mark.rule("cancel-cuts-short")
async def test_clear_cancels_the_turn_and_answers_cleared(client: Client, redis: Redis) -> None:
    ws = await client.ws_connect(SPEAK.format(encoding="linear16", rate=24_000))
    await ws.receive()  # Metadata
    await ws.send_json({"type": "Speak", "text": "A long answer that the user talks over."})
    cast_id = await _next_cast(redis, set())
    await ws.send_json({"type": "Clear"})
    cleared = msgspec.json.decode((await asyncio.wait_for(ws.receive(), 10)).data)
    assert cleared == {"type": "Cleared", "sequence_id": 0}
    assert await castlog.is_cancelled(redis, cast_id)
    await ws.send_json({"type": "Speak", "text": "A new answer."})  # the cleared cast never ends here
    await ws.send_json({"type": "Flush"})
    new_id = await _next_cast(redis, {cast_id})
    await worker_writes(CastStore(redis), new_id, [("A new answer.", CHUNKS[0])], end=True)
    audio, flushed = await _until_flushed(ws)
    assert flushed == {"type": "Flushed", "sequence_id": 0} and len(audio) > 0
    await ws.send_json({"type": "Shout"})
    warning = msgspec.json.decode((await asyncio.wait_for(ws.receive(), 10)).data)
    assert warning["type"] == "Warning" and warning["code"] == "INVALID_MESSAGE"
    await ws.close()


async def test_a_client_that_leaves_mid_turn_cancels_it(client: Client, redis: Redis) -> None:
    ws = await client.ws_connect(SPEAK.format(encoding="linear16", rate=24_000))
    await ws.receive()
    await ws.send_json({"type": "Speak", "text": "Talking to nobody."})
    cast_id = await _next_cast(redis, set())
    await ws.close()
    assert await until_cancelled(redis, cast_id)


async def test_bad_queries_are_refused_before_the_upgrade(client: Client) -> None:
    for query in ("encoding=opus", "sample_rate=4000", "sample_rate=x", "model=nobody"):
        with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
            await client.ws_connect(f"/v1/speak?{query}")
        assert caught.value.status == 422


async def test_keys_want_a_token(make_client: MakeClient) -> None:
    client = await make_client(api_keys=frozenset({"k1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}))
    with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
        await client.ws_connect("/v1/speak")
    assert caught.value.status == 401
    ws = await client.ws_connect("/v1/speak", headers={"Authorization": "Token k1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})
    assert msgspec.json.decode((await ws.receive()).data)["type"] == "Metadata"
    await ws.close()


@pytest.mark.parametrize("last", ["Flush", "Close"])
async def test_a_client_that_hangs_up_after_flush_or_close_cancels_what_is_not_yet_spoken(
    client: Client, redis: Redis, last: str
) -> None:
    ws = await client.ws_connect(SPEAK.format(encoding="linear16", rate=24_000))
    await ws.receive()
    await ws.send_json({"type": "Speak", "text": "An answer nobody will hear."})
    cast_id = await _next_cast(redis, set())
    await ws.send_json({"type": last})
    for _ in range(100):  # the turn's text is complete, none of it spoken yet
        text = await castlog.LiveStore(redis).read_text(cast_id)
        if text is not None and text.closed is not None:
            break
        await asyncio.sleep(0.02)
    await ws.close()
    assert await until_cancelled(redis, cast_id)


def _from(source: str) -> aiohttp.ClientSession:
    """A client whose sockets come from the loopback address ``source`` (a client of its own)."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(source, 0)))


async def _event(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    msg = await asyncio.wait_for(ws.receive(), 10)
    assert msg.type == aiohttp.WSMsgType.TEXT, msg
    return dict(msgspec.json.decode(msg.data))


async def test_one_address_holds_at_most_its_sessions_and_another_is_still_served(
    make_client: MakeClient, redis: Redis
) -> None:
    """Finding 1 of #35: one address opened every socket of the process. Now its silent sockets
    are capped (INTAKE_SESSIONS_WAITING_PER_CLIENT), and its sessions once they speak
    (INTAKE_LIVE_SESSIONS_PER_CLIENT), while another address is served."""
    client = await make_client(live_sessions_per_client=2, sessions_waiting_per_client=2)
    url = client.make_url(SPEAK.format(encoding="linear16", rate=24_000))
    async with _from("127.0.0.2") as hostile, _from("127.0.0.3") as other:
        silent = [await hostile.ws_connect(url) for _ in range(2)]
        for ws in silent:
            assert (await _event(ws))["type"] == "Metadata"
        refused = await hostile.ws_connect(url)
        assert (await _event(refused))["err_code"] == "BUSY"  # a third silent socket
        for ws in silent:
            await ws.close()
        for _ in range(250):  # their places are given back as their sessions end
            if not client.app[INTAKE].session_waiting.held:
                break
            await asyncio.sleep(0.02)
        speaking = [await hostile.ws_connect(url) for _ in range(2)]
        for ws in speaking:
            assert (await _event(ws))["type"] == "Metadata"
            await ws.send_json({"type": "Speak", "text": "Mine. "})
        seen = {await _next_cast(redis, set()) for _ in range(1)}
        await _next_cast(redis, seen)
        third = await hostile.ws_connect(url)
        assert (await _event(third))["type"] == "Metadata"
        await third.send_json({"type": "Speak", "text": "One more. "})
        assert (await _event(third))["err_code"] == "TOO_MANY_SESSIONS"
        served = await other.ws_connect(url)
        assert (await _event(served))["type"] == "Metadata"
        await served.send_json({"type": "Speak", "text": "Still served."})
        await served.send_json({"type": "Flush"})
        cast_id = await _next_cast(redis, seen)
        await worker_writes(CastStore(redis), cast_id, [("Still served.", CHUNKS[0])], end=True)
        audio, flushed = await _until_flushed(served)
        assert flushed["sequence_id"] == 0 and audio
        for ws in (refused, *speaking, third, served):
            await ws.close()


async def test_pongs_to_the_servers_pings_do_not_keep_an_idle_session(make_client: MakeClient) -> None:
    """Finding 2 of #35: the idle limit runs from the client's last message, pongs aside."""
    client = await make_client(live_idle_s=0.6, live_ping_s=0.1)
    ws = await client.ws_connect(SPEAK.format(encoding="linear16", rate=24_000))
    assert (await _event(ws))["type"] == "Metadata"
    await ws.send_json({"type": "Speak", "text": "Hello. "})
    assert (await _event(ws))["code"] == "IDLE"  # (aiohttp's client answers each ping while it waits here)
    await ws.close()
