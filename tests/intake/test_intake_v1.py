"""`/v1/*` through intake's real app over real Redis; a test plays the worker by appending real
MP3 chunks to the log (the real model runs in tests/system/test_openai_sdk.py)."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import aiohttp
import av
import numpy as np
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from jobstreams import read_jobs
from redis.asyncio import Redis

from castlog import Audio, CastStore, Eos, Error, LogReader, Start, content_id
from intake.context import INTAKE
from intake.speech.formats import decode_chunk
from intake.speech.v1 import OPENAI_VOICES, resolve_voice, voice_list
from servicekit.answers import V1Voice
from synth.mp3 import encode_chunk

from .conftest import MakeClient, key_names

Client = TestClient[Any, Any]
SPEECH = {"model": "tts-1", "input": "Hello there. Goodbye.", "voice": "jf_alpha"}


def _tone(ms: int, hz: float) -> bytes:
    t = np.arange(24 * ms) / 24_000
    return encode_chunk((0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)).data


CHUNKS = [_tone(700, 220), _tone(900, 330)]


async def play_worker(store: CastStore, cast_id: str, chunks: list[bytes], *, gap_s: float = 0.0) -> None:
    """Append start, the audio records (``gap_s`` apart) and eos, as synth would."""
    while await LogReader(store.redis).tail(cast_id) == 0:
        await asyncio.sleep(0.01)
    tail = await store.append(cast_id, 1, [Start(attempt=1, resume_from=0, at=0)])
    offset = 0
    for i, body in enumerate(chunks):
        await asyncio.sleep(gap_s)
        d = len(decode_chunk(body)) // 24
        tail = await store.append(cast_id, tail, [Audio(i=i, t=f"chunk {i}", d=d, o=offset, body=body)])
        offset += d
    await store.append(cast_id, tail, [Eos(sentences=len(chunks), audio_ms=offset, attempts=1)])


def openai_error(body: dict[str, Any]) -> dict[str, Any]:
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


@pytest.mark.parametrize(
    ("change", "param", "code"),
    [
        ({"response_format": "ogg"}, "response_format", "invalid_field"),
        ({"speed": 5}, "speed", "invalid_field"),
        ({"model": "whisper-1"}, "model", "model_not_found"),
        ({"voice": "nobody"}, "voice", "unknown_voice"),
        ({"stream_format": "chunks"}, "stream_format", "invalid_field"),
        ({"lang_code": "x"}, "lang_code", "invalid_field"),
        ({"volume_multiplier": 9}, "volume_multiplier", "invalid_field"),
        ({"voice": "af_heart(2)+nobody"}, "voice", "unknown_voice"),
        ({"voice": "af_heart(x)"}, "voice", "unknown_voice"),
        ({"input": "  "}, "input", "empty_text"),
    ],
)
async def test_a_bad_request_is_an_openai_error_naming_its_field_and_leaves_no_key(
    client: Client, redis: Redis, change: dict[str, Any], param: str, code: str
) -> None:
    resp = await client.post("/v1/audio/speech", json={**SPEECH, **change})
    assert resp.status == 422
    error = openai_error(await resp.json())
    assert (error["param"], error["code"], error["type"]) == (param, code, "invalid_request_error")
    assert await key_names(redis) == set()


@pytest.mark.rule("v1-is-a-submit")
async def test_speech_streams_each_chunk_as_it_is_appended(client: Client, store: CastStore) -> None:
    cast_id = content_id(SPEECH["input"], "jf_alpha")
    worker = asyncio.create_task(play_worker(store, cast_id, CHUNKS, gap_s=0.5))
    resp = await client.post("/v1/audio/speech", json={**SPEECH, "response_format": "pcm"})
    assert resp.status == 200 and resp.headers["X-Cast-Id"] == cast_id
    assert resp.headers["Location"] == f"/c/{cast_id}" and resp.headers["Content-Type"] == "audio/pcm"
    first = await resp.content.readany()
    assert first and not worker.done(), "the first chunk arrives while the cast is still being made"
    pcm = first + await resp.read()
    await worker
    want = b"".join((np.clip(decode_chunk(c), -1, 1) * 32767).round().astype("<i2").tobytes() for c in CHUNKS)
    assert pcm == want, "exactly the chunks' samples, end to end"


async def test_a_client_hanging_up_mid_speech_is_no_error(
    client: Client, store: CastStore, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The soak (#38): a write that meets the hung-up client's closing connection (before aiohttp
    cancels the handler) was logged as an unexpected error with its traceback and counted a 500."""
    writes = 0
    write = web.StreamResponse.write

    async def hung_up_after_one(self: web.StreamResponse, data: bytes) -> None:
        nonlocal writes
        writes += 1
        if writes > 1:
            raise aiohttp.ClientConnectionResetError("Cannot write to closing transport")
        await write(self, data)

    monkeypatch.setattr(web.StreamResponse, "write", hung_up_after_one)
    cast_id = content_id(SPEECH["input"], "jf_alpha")
    worker = asyncio.create_task(play_worker(store, cast_id, CHUNKS))
    resp = await client.post("/v1/audio/speech", json={**SPEECH, "response_format": "pcm"})
    assert resp.status == 200
    await asyncio.wait_for(resp.read(), 30)  # the first chunk, then the stream ends (no 500 after it)
    await worker
    assert writes == 2, "the second chunk's write met the hang-up"
    assert not [r for r in caplog.records if r.levelname == "ERROR"], "a hang-up is not intake's error"
    metrics = await (await client.get("/metrics")).text()
    assert 'route="/v1/audio/speech",status="200"' in metrics
    assert 'status="500"' not in metrics


@pytest.mark.parametrize("fmt", ["mp3", "wav", "flac", "opus", "aac"])
@pytest.mark.rule("formats-exact")
async def test_every_format_decodes_to_the_mp3s_duration(client: Client, store: CastStore, fmt: str) -> None:
    cast_id = content_id(SPEECH["input"], "jf_alpha")
    worker = asyncio.create_task(play_worker(store, cast_id, CHUNKS))
    resp = await client.post("/v1/audio/speech", json={**SPEECH, "response_format": fmt})
    data = await resp.read()
    await worker
    exact = sum(len(decode_chunk(c)) for c in CHUNKS)
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        samples = sum(f.samples for f in container.decode(stream)) * 24_000 // stream.rate
    slack = 1024 if fmt == "aac" else 0  # ADTS rounds up to its 1024-sample frame
    assert 0 <= samples - exact <= slack, (fmt, samples, exact)
    if fmt in ("wav", "flac"):  # lossless: exactly the chunks' samples, seams included
        with av.open(io.BytesIO(data)) as container:
            decoded = np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)])
        want = np.concatenate([(np.clip(decode_chunk(c), -1, 1) * 32767).round() for c in CHUNKS]).astype("<i2")
        assert np.array_equal(decoded, want)


async def test_a_failed_cast_before_any_audio_is_a_500_and_a_past_failure_is_retried(
    client: Client, store: CastStore
) -> None:
    cast_id = content_id(SPEECH["input"], "jf_alpha")

    async def fail() -> None:
        while await LogReader(store.redis).tail(cast_id) == 0:
            await asyncio.sleep(0.01)
        await store.append(cast_id, 1, [Error(reason="model exploded", attempts=3)])

    failing = asyncio.create_task(fail())
    resp = await client.post("/v1/audio/speech", json=SPEECH)
    await failing
    assert resp.status == 500
    assert openai_error(await resp.json())["code"] == "synthesis_failed"

    async def retry() -> None:  # the repeat re-enqueued the cast: its new attempt goes after the error
        while len(await read_jobs(store.redis)) < 2:
            await asyncio.sleep(0.01)
        tail = await store.append(cast_id, 2, [Start(attempt=4, resume_from=0, at=0)])
        d = len(decode_chunk(CHUNKS[0])) // 24
        tail = await store.append(cast_id, tail, [Audio(i=0, t="chunk", d=d, o=0, body=CHUNKS[0])])
        await store.append(cast_id, tail, [Eos(sentences=1, audio_ms=d, attempts=4)])

    retrying = asyncio.create_task(retry())
    resp = await client.post("/v1/audio/speech", json=SPEECH)
    assert resp.status == 200 and await resp.read() == CHUNKS[0]
    await retrying


async def test_sse_gives_deltas_then_done(client: Client, store: CastStore) -> None:
    import base64
    import json

    cast_id = content_id(SPEECH["input"], "jf_alpha")
    worker = asyncio.create_task(play_worker(store, cast_id, CHUNKS))
    resp = await client.post("/v1/audio/speech", json={**SPEECH, "stream_format": "sse"})
    text = await resp.text()
    await worker
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events] == ["speech.audio.delta"] * 2 + ["speech.audio.done"]
    assert b"".join(base64.b64decode(e["audio"]) for e in events[:2]) == b"".join(CHUNKS)


K1, K2 = "k1" * 16, "k2" * 16  # keys of 32 characters: shorter ones refuse to start


async def test_keys_guard_v1_and_submits_but_not_reads(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(api_keys=frozenset({K1, K2}))
    resp = await client.post("/v1/audio/speech", json=SPEECH)
    assert resp.status == 401 and openai_error(await resp.json())["code"] == "invalid_api_key"
    resp = await client.post("/api/casts", json={"text": "Hi."}, headers={"Authorization": "Bearer nope"})
    assert resp.status == 401 and (await resp.json())["error"] == "invalid_api_key"
    assert await key_names(redis) == {"rl/intake-auth/127.0.0.1"}  # the failure counted, nothing else
    resp = await client.post("/api/casts", json={"text": "Hi."}, headers={"Authorization": f"Bearer {K2}"})
    assert resp.status == 201
    assert (await client.get("/api/voices")).status == 200
    resp = await client.get("/v1/models", headers={"Authorization": f"Bearer {K1}"})
    assert [m["id"] for m in (await resp.json())["data"]] == ["kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"]


async def one_stream_held_then_refused(client: Any, store: CastStore) -> tuple[str, asyncio.Task[Any]]:
    """A /v1 stream held open (its cast claimed), then a second one refused 429 `too_many_streams`."""
    cast_id = content_id(SPEECH["input"], "jf_alpha")
    first = asyncio.create_task(client.post("/v1/audio/speech", json=SPEECH))
    while await LogReader(store.redis).tail(cast_id) == 0:
        await asyncio.sleep(0.01)
    resp = await client.post("/v1/audio/speech", json={**SPEECH, "input": "Another."})
    assert resp.status == 429 and openai_error(await resp.json())["code"] == "too_many_streams"
    return cast_id, first


async def test_too_many_speech_streams_is_429(make_client: MakeClient, store: CastStore) -> None:
    client = await make_client(max_speech_streams=1)
    cast_id, first = await one_stream_held_then_refused(client, store)
    await play_worker(store, cast_id, CHUNKS[:1])
    assert (await first).status == 200


@pytest.mark.rule("streams-per-client")
async def test_one_client_holds_at_most_its_cap_of_speech_streams(make_client: MakeClient, store: CastStore) -> None:
    """Finding 4 of #21: the 64 /v1 streams could all be held by one client."""
    client = await make_client(speech_streams_per_client=1)
    cast_id, first = await one_stream_held_then_refused(client, store)
    other = asyncio.create_task(client.post("/v1/audio/speech", json=SPEECH, headers={"X-Forwarded-For": "203.0.113.9"}))
    await play_worker(store, cast_id, CHUNKS[:1])
    served = [await first, await other]
    assert [r.status for r in served] == [200, 200]  # another client was served
    for resp in served:
        await resp.read()
    for _ in range(200):  # the seat comes back as the stream ends
        if await store.redis.zcard("rl/intake-speech/127.0.0.1") == 0:
            break
        await asyncio.sleep(0.02)
    again = await client.post("/v1/audio/speech", json=SPEECH)
    assert again.status == 200


@pytest.mark.rule("auth-failures-limited")
async def test_failed_keys_are_counted_and_limited_per_client(make_client: MakeClient, redis: Redis) -> None:
    """#21 finding 8: failed attempts were neither limited nor counted: a key could be guessed at
    the speed of the network."""
    client = await make_client(api_keys=frozenset({K1}), auth_failures_per_min=3)
    wrong = {"Authorization": "Bearer " + "g" * 32}
    statuses = [(await client.post("/api/casts", json={"text": "Hi."}, headers=wrong)).status for _ in range(5)]
    assert statuses == [401, 401, 401, 429, 429]
    resp = await client.post("/api/casts", json={"text": "Hi."}, headers={"Authorization": f"Bearer {K1}"})
    assert resp.status == 429 and (await resp.json())["error"] == "too_many_failures"  # not even compared
    other = await client.post("/api/casts", json={"text": "Hi."},
                              headers={"Authorization": f"Bearer {K1}", "X-Forwarded-For": "203.0.113.9"})
    assert other.status == 201  # another client is not locked out
    metrics = await (await client.get("/metrics")).text()
    assert 'streamtts_intake_auth_failures_total{credential="api_key"} 4.0' in metrics


def test_openai_voice_names_map_to_the_closest_installed_english_pack() -> None:
    installed = ("af_bella", "af_heart", "am_michael", "bm_george", "jf_alpha")
    assert resolve_voice("alloy", installed) == "af_heart"
    assert resolve_voice("nova", installed) == "af_bella"
    assert resolve_voice("echo", installed) == "am_michael"
    assert resolve_voice("fable", installed) == "bm_george"
    assert resolve_voice("jf_alpha", installed) == "jf_alpha"
    assert resolve_voice("alloy", (*installed, "af_alloy")) == "af_alloy", "the same name first"
    with pytest.raises(Exception, match="install"):
        resolve_voice("alloy", ("jf_alpha",))
    listed = {v.id: v.name for v in voice_list(installed)}
    assert listed["jf_alpha"] == "jf_alpha" and listed["onyx"] == "onyx (am_michael)"
    assert set(OPENAI_VOICES) >= {"alloy", "echo", "fable", "onyx", "nova", "shimmer"}
    assert voice_list(("jf_alpha",)) == [V1Voice(id="jf_alpha", name="jf_alpha")], "no pack, no OpenAI name"


async def test_a_shutdown_ends_open_speech_streams(client: Client, store: CastStore) -> None:
    cast_id = content_id(SPEECH["input"], "jf_alpha")
    resp_task = asyncio.create_task(client.post("/v1/audio/speech", json=SPEECH))
    while await LogReader(store.redis).tail(cast_id) == 0:  # submitted: the stream now waits for audio that never comes
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    assert client.app is not None
    await client.app.shutdown()
    with pytest.raises(aiohttp.ClientError):  # the connection closes without an answer
        await asyncio.wait_for(resp_task, 30)
    assert not client.app[INTAKE].speech_streams


async def blocked_clients(redis: Redis) -> list[dict[str, Any]]:
    """The connections Redis holds in a blocking command (CLIENT LIST flag ``b``)."""
    return [c for c in await redis.client_list() if "b" in c["flags"]]


@pytest.mark.rule("one-upstream-tail")
async def test_forty_speech_streams_of_one_cast_hold_one_blocked_read(
    make_client: MakeClient, store: CastStore, redis: Redis
) -> None:
    """Before the shared tail each stream held its own blocking XREAD (41 for 40 streams). (One
    client here, so its own cap, INTAKE_SPEECH_STREAMS_PER_CLIENT, is raised.)"""
    client = await make_client(speech_streams_per_client=64)
    cast_id = content_id(SPEECH["input"], "jf_alpha")
    posts = [asyncio.create_task(client.post("/v1/audio/speech", json=SPEECH)) for _ in range(40)]
    tail = client.server.app[INTAKE].tail
    while len(tail.listeners) < 40 or not all(lsn.subscribed for lsn in tail.listeners):
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)  # the tail's read, re-issued after the last join, is blocked again
    blocked = await blocked_clients(redis)
    assert len(blocked) <= 3, blocked
    assert [c["name"] for c in blocked] == ["intake-tail"]
    await play_worker(store, cast_id, CHUNKS)
    bodies = [await (await p).read() for p in posts]
    assert len(set(bodies)) == 1 and bodies[0], "every stream got the whole cast"


# The append script's own commands: the worker's, not intake's.
APPEND_COMMANDS = {"cmdstat_evalsha", "cmdstat_eval", "cmdstat_xadd", "cmdstat_xlen", "cmdstat_time"}
FLAT_RECORDS = 12


async def command_calls(redis: Redis) -> dict[str, int]:
    stats = await redis.info("commandstats")
    return {k: int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info"}


@pytest.mark.rule("one-upstream-tail")
@pytest.mark.parametrize("streams", [1, 60])
async def test_redis_commands_per_record_stay_flat_as_speech_streams_grow(
    make_client: MakeClient, store: CastStore, redis: Redis, streams: int
) -> None:
    """While N `/v1/audio/speech` streams of one cast follow it, each record costs intake's Redis
    about one command (the shared tail's XREAD), whether one stream follows or sixty; counted at
    Redis (INFO commandstats), from the first audio record until every stream has the last."""
    client = await make_client(speech_streams_per_client=64)
    cast_id = content_id(SPEECH["input"], "jf_alpha")
    posts = [asyncio.create_task(client.post("/v1/audio/speech", json=SPEECH)) for _ in range(streams)]
    tail = client.server.app[INTAKE].tail
    while len(tail.listeners) < streams or not all(lsn.subscribed for lsn in tail.listeners):
        await asyncio.sleep(0.02)
    seq = await store.append(cast_id, 1, [Start(attempt=1, resume_from=0, at=0)])
    while not all(lsn.next_seq == seq for lsn in tail.listeners):
        await asyncio.sleep(0.01)
    before = await command_calls(redis)
    body = CHUNKS[0]
    d = len(decode_chunk(body)) // 24
    for i in range(FLAT_RECORDS):
        seq = await store.append(cast_id, seq, [Audio(i=i, t=f"chunk {i}", d=d, o=d * i, body=body)])
        await asyncio.sleep(0.005)
    while not all(lsn.next_seq == seq for lsn in tail.listeners):  # every stream has the last record
        await asyncio.sleep(0.01)
    after = await command_calls(redis)
    await store.append(cast_id, seq, [Eos(sentences=FLAT_RECORDS, audio_ms=d * FLAT_RECORDS, attempts=1)])
    bodies = [await (await p).read() for p in posts]
    assert len(set(bodies)) == 1 and len(bodies[0]) == FLAT_RECORDS * len(body)
    calls = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0) and k not in APPEND_COMMANDS}
    calls["cmdstat_xrevrange"] = calls.get("cmdstat_xrevrange", 0) - FLAT_RECORDS  # each append's own
    reads = {k: n for k, n in calls.items() if n}
    # one XREAD per record at most (fewer when one read brings several), and nothing per stream
    assert set(reads) <= {"cmdstat_xread"} and reads.get("cmdstat_xread", 0) <= FLAT_RECORDS + 1, reads
