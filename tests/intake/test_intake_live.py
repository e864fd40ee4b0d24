"""Open (live) casts through intake's real app: open, fragments at offsets (resend, gap, overlap),
close, refusals that leave no trace, and the WebSocket session against records written as the
worker writes them (the model's own run is in tests/system/test_live.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import msgspec
import pytest
from aiohttp.test_utils import TestClient
from jobstreams import read_jobs
from redis.asyncio import Redis

import castlog
from castlog import SAMPLE_RATE, Audio, CastStore, Eos, LiveStore, LogReader, Start

from .conftest import MakeClient, keys_besides_rate_limits

Client = TestClient[Any, Any]
WS = "/v1/audio/speech/live"
# The write token each cast of these tests was opened with (its opener's secret).
TOKENS: dict[str, str] = {}
# A well-formed token that opened nothing.
STRANGER = "s" * 43


def writer(cast_id: str) -> dict[str, str]:
    """The opener's Authorization header for ``cast_id``."""
    return {"Authorization": f"Bearer {TOKENS.get(cast_id, STRANGER)}"}


async def open_live(client: Client, **fields: Any) -> str:
    resp = await client.post("/api/casts", json={"live": True, **fields})
    assert resp.status == 201, await resp.text()
    body = await resp.json()
    assert resp.headers["Location"] == body["url"] == f"/c/{body['id']}"
    assert len(body["write_token"]) >= 32 and resp.headers["Cache-Control"] == "no-store"
    TOKENS[body["id"]] = body["write_token"]
    return str(body["id"])


async def send(client: Client, cast_id: str, text: str, offset: int, **more: Any) -> tuple[int, dict[str, Any]]:
    resp = await client.post(f"/api/casts/{cast_id}/text", json={"text": text, "offset": offset, **more},
                             headers=writer(cast_id))
    return resp.status, await resp.json()


async def close(client: Client, cast_id: str, **body: Any) -> aiohttp.ClientResponse:
    return await client.post(f"/api/casts/{cast_id}/close", json=body, headers=writer(cast_id))


async def text_of(redis: Redis, cast_id: str) -> castlog.LiveText:
    text = await LiveStore(redis).read_text(cast_id)
    assert text is not None
    return text


async def test_open_claims_a_random_id_with_live_meta_and_a_live_job(client: Client, redis: Redis) -> None:
    first, second = await open_live(client, voice="af_heart"), await open_live(client, voice="af_heart")
    assert first != second and castlog.is_cast_id(first)
    (entry,) = await LogReader(redis).read(first)
    assert isinstance(entry.record, castlog.Meta) and entry.record.live and entry.record.sentences == 0
    assert entry.record.title == "Live cast" and entry.record.voice == "af_heart"
    jobs = await read_jobs(redis, castlog.JOBS_LIVE)
    assert sorted(j.id for j in jobs) == sorted([first, second])  # two lanes: no order between them
    assert await read_jobs(redis) == []


async def test_generate_with_json_opens_a_live_cast_as_post_api_casts_does(client: Client, redis: Redis) -> None:
    """/generate answers JSON as /api/casts: {"live": true} opens a cast (it once opened one and answered 500)."""
    resp = await client.post("/generate", json={"live": True, "voice": "af_heart"})
    assert resp.status == 201, await resp.text()
    body = await resp.json()
    assert body["status"] == "open" and body["offset"] == 0 and resp.headers["Location"] == f"/c/{body['id']}"
    assert (await text_of(redis, body["id"])).voice == "af_heart"


@pytest.mark.rule("fragments-idempotent")
async def test_fragments_append_in_order_and_a_resend_appends_nothing(client: Client, redis: Redis) -> None:
    cast_id = await open_live(client)
    assert await send(client, cast_id, "Hello th", 0) == (200, {"id": cast_id, "status": "appended", "offset": 8})
    assert (await send(client, cast_id, "ere. How", 8))[1]["offset"] == 16
    assert await send(client, cast_id, "ere. How", 8) == (200, {"id": cast_id, "status": "duplicate", "offset": 16})
    assert (await send(client, cast_id, "Hello th", 0))[1]["status"] == "duplicate"
    assert (await text_of(redis, cast_id)).text == "Hello there. How"


@pytest.mark.rule("fragments-idempotent")
async def test_a_gap_or_an_overlap_is_refused_with_where_to_go_on(client: Client, redis: Redis) -> None:
    cast_id = await open_live(client)
    await send(client, cast_id, "Hello", 0)
    status, body = await send(client, cast_id, " world", 9)
    assert (status, body["error"], body["offset"]) == (409, "offset_gap", 5)
    status, body = await send(client, cast_id, "lo world", 3)
    assert (status, body["error"], body["offset"]) == (409, "offset_overlap", 5)
    assert (await text_of(redis, cast_id)).text == "Hello"


async def test_close_records_the_final_texts_content_id_and_is_idempotent(client: Client, redis: Redis) -> None:
    cast_id = await open_live(client, voice="af_heart")
    await send(client, cast_id, "Hello\r\n there.\x07", 0)
    first = await close(client, cast_id, offset=15)
    assert first.status == 200
    body = await first.json()
    assert body["content_id"] == castlog.content_id("Hello\n there.", "af_heart") and body["offset"] == 15
    again = await close(client, cast_id)
    assert (again.status, (await again.json())["content_id"]) == (200, body["content_id"])
    status, refused = await send(client, cast_id, " More.", 15)
    assert (status, refused["error"]) == (409, "cast_closed")
    assert [e.kind for e in (await text_of(redis, cast_id)).events] == ["text", "flush", "closed"][::2]


async def test_close_at_an_offset_the_server_has_not_reached_is_refused(client: Client) -> None:
    cast_id = await open_live(client)
    await send(client, cast_id, "Hello", 0)
    resp = await close(client, cast_id, offset=9)
    assert resp.status == 409 and (await resp.json())["offset"] == 5


async def test_flush_is_recorded_once(client: Client, redis: Redis) -> None:
    cast_id = await open_live(client)
    await send(client, cast_id, "Let me think", 0, flush=True)
    await send(client, cast_id, "", 12, flush=True)
    assert [e.kind for e in (await text_of(redis, cast_id)).events] == ["text", "flush"]


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("/api/casts", {"live": True, "voice": "nobody"}, 422, "unknown_voice"),
        ("/api/casts", {"live": True, "speed": 9}, 422, "invalid_speed"),
        ("/api/casts", {"live": True, "speed": "fast"}, 422, "invalid_field"),
        ("/api/casts", {"live": True, "title": "x" * 300}, 422, "title_too_long"),
        ("/api/casts/AbCdEfGhIjKl/text", {"text": "Hi.", "offset": 0}, 404, "not_found"),
        ("/api/casts/bad/text", {"text": "Hi.", "offset": 0}, 404, "not_found"),
        ("/api/casts/AbCdEfGhIjKl/close", {}, 404, "not_found"),
    ],
)
async def test_bad_live_requests_are_refused_and_leave_no_trace(
    client: Client, redis: Redis, path: str, body: dict[str, Any], status: int, code: str
) -> None:
    resp = await client.post(path, json=body, headers=writer(""))
    assert (resp.status, (await resp.json())["error"]) == (status, code)
    assert await keys_besides_rate_limits(redis) == set()


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"text": "Hi."}, 422, "invalid_field"),
        ({"text": 5, "offset": 0}, 422, "invalid_field"),
        ({"text": "Hi.", "offset": -1}, 422, "invalid_offset"),
        ({"text": "x" * 101, "offset": 0}, 413, "text_too_long"),
    ],
)
async def test_bad_fragments_are_refused_and_append_nothing(
    make_client: MakeClient, redis: Redis, body: dict[str, Any], status: int, code: str
) -> None:
    client = await make_client(max_chars=100)
    cast_id = await open_live(client)
    resp = await client.post(f"/api/casts/{cast_id}/text", json=body, headers=writer(cast_id))
    assert (resp.status, (await resp.json())["error"]) == (status, code)
    assert (await text_of(redis, cast_id)).events == []


@pytest.mark.rule("write-token")
@pytest.mark.parametrize("route", ["text", "close"])
@pytest.mark.parametrize("authorization", [None, f"Bearer {STRANGER}", "Basic eDp5", "Bearer "])
async def test_a_write_without_the_openers_token_is_refused_401_and_writes_nothing(
    client: Client, redis: Redis, route: str, authorization: str | None
) -> None:
    """Finding 1 of #21: anyone who had the link could write to and close someone else's cast."""
    cast_id = await open_live(client)
    await send(client, cast_id, "Mine. ", 0)
    headers = {} if authorization is None else {"Authorization": authorization}
    body = {"text": "Theirs.", "offset": 6} if route == "text" else {}
    resp = await client.post(f"/api/casts/{cast_id}/{route}", json=body, headers=headers)
    assert resp.status == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert (await resp.json())["error"] == "invalid_write_token"
    text = await text_of(redis, cast_id)
    assert text.text == "Mine. " and text.closed is None
    assert await send(client, cast_id, "Still mine.", 6) == (200, {"id": cast_id, "status": "appended", "offset": 17})


@pytest.mark.rule("write-token")
async def test_one_casts_token_does_not_write_to_another(client: Client, redis: Redis) -> None:
    mine, theirs = await open_live(client), await open_live(client)
    resp = await client.post(f"/api/casts/{theirs}/close", json={}, headers=writer(mine))
    assert resp.status == 401
    assert (await text_of(redis, theirs)).closed is None
    assert TOKENS[mine].encode() not in b"".join(v for _, f in await redis.xrange(castlog.catalog_key(mine)) for v in f.values())


async def test_fragments_to_a_whole_text_cast_are_refused(client: Client, redis: Redis) -> None:
    resp = await client.post("/api/casts", json={"text": "A whole text."})
    cast_id = (await resp.json())["id"]
    status, body = await send(client, cast_id, "More.", 0)  # a token opened nothing here
    assert (status, body["error"]) == (409, "not_live")
    assert await redis.xlen(castlog.catalog_key(cast_id)) == 1


# ---- the WebSocket -------------------------------------------------------------------------------


async def receive_json(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    msg = await asyncio.wait_for(ws.receive(), 10)
    assert msg.type == aiohttp.WSMsgType.TEXT, msg
    return msgspec.json.decode(msg.data)  # type: ignore[no-any-return]


async def start(client: Client, **fields: Any) -> tuple[aiohttp.ClientWebSocketResponse, str]:
    ws = await client.ws_connect(WS)
    await ws.send_json({"type": "start", **fields})
    event = await receive_json(ws)
    assert event["type"] == "cast" and event["url"] == f"/c/{event['id']}"
    TOKENS[event["id"]] = event["write_token"]
    return ws, str(event["id"])


async def worker_writes(store: CastStore, cast_id: str, audio: list[tuple[str, bytes]], *, end: bool,
                        audio_ms: int = 0) -> None:
    """The records a worker would append: a start, audio per sentence, and eos (saying ``audio_ms``)."""
    tail = await LogReader(store.redis).tail(cast_id)
    records: list[castlog.Record] = [] if tail > 1 else [Start(attempt=1, resume_from=0, at=0)]
    done = sum(1 for e in await LogReader(store.redis).read(cast_id, 0, 1000) if e.kind == "audio")
    for k, (text, body) in enumerate(audio):
        records.append(Audio(i=done + k, t=text, d=24 * (k + 1), o=0, n=done + k + 1, body=body))
    if end:
        records.append(Eos(sentences=done + len(audio), audio_ms=audio_ms, attempts=1))
    await store.append(cast_id, tail, records)


async def test_websocket_writes_fragments_and_sends_each_sentence_then_done(client: Client, redis: Redis) -> None:
    store = CastStore(redis)
    ws, cast_id = await start(client, voice="af_heart")
    await ws.send_json({"type": "text", "text": "Hello th"})
    await ws.send_json({"type": "text", "text": "ere. How are"})
    await ws.send_json({"type": "flush"})
    await ws.send_json({"type": "text", "text": " you?"})
    await ws.send_json({"type": "close"})
    for _ in range(250):  # every message is taken once the text is closed
        if (await text_of(redis, cast_id)).closed is not None:
            break
        await asyncio.sleep(0.02)
    text = await text_of(redis, cast_id)
    assert text.text == "Hello there. How are you?" and text.closed is not None
    assert [e.kind for e in text.events] == ["text", "text", "flush", "text", "closed"]
    await worker_writes(store, cast_id, [("Hello there.", b"mp3-one"), ("How are", b"mp3-two")], end=False)
    await worker_writes(store, cast_id, [("you?", b"mp3-three")], end=True)
    got: list[Any] = []
    async for msg in ws:
        got.append(msg.data if msg.type == aiohttp.WSMsgType.BINARY else msgspec.json.decode(msg.data))
    assert got == [
        {"type": "sentence", "index": 0, "text": "Hello there."}, b"mp3-one",
        {"type": "sentence_done", "index": 0, "duration_ms": 24},
        {"type": "sentence", "index": 1, "text": "How are"}, b"mp3-two",
        {"type": "sentence_done", "index": 1, "duration_ms": 48},
        {"type": "sentence", "index": 2, "text": "you?"}, b"mp3-three",
        {"type": "sentence_done", "index": 2, "duration_ms": 24},
        {"type": "done", "sentences": 3, "audio_ms": 0},
    ]
    assert ws.close_code == 1000


async def test_websocket_pcm_frames_are_the_decoded_mp3(client: Client, redis: Redis) -> None:
    import numpy as np
    from mp3decode import decode_mp3

    from synth.mp3 import encode_chunk

    tone = (0.3 * np.sin(2 * np.pi * 220 * np.arange(24_000) / 24_000)).astype(np.float32)
    mp3 = encode_chunk(tone, 48_000).data
    ws, cast_id = await start(client, format="pcm")
    await worker_writes(CastStore(redis), cast_id, [("Tone.", mp3)], end=True)
    assert (await receive_json(ws))["type"] == "sentence"
    frame = await asyncio.wait_for(ws.receive(), 10)
    assert frame.type == aiohttp.WSMsgType.BINARY
    samples = np.frombuffer(frame.data, dtype="<i2").astype(np.float32) / 32768
    want = decode_mp3(mp3)
    assert len(samples) == len(want) and float(np.max(np.abs(samples - want))) < 1e-3
    assert SAMPLE_RATE == 24_000
    await ws.close()


async def test_websocket_bad_start_is_refused_with_an_error_and_leaves_no_trace(client: Client, redis: Redis) -> None:
    for bad in ({"type": "text", "text": "Hi."}, {"type": "start", "voice": "nobody"},
                {"type": "start", "format": "wav"}, {"type": "start", "speed": "fast"}):
        ws = await client.ws_connect(WS)
        await ws.send_json(bad)
        event = await receive_json(ws)
        assert event["type"] == "error", bad
        assert (await ws.receive()).type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == 4400
    assert await keys_besides_rate_limits(redis) == set()


async def test_websocket_bad_messages_get_errors_and_the_session_goes_on(client: Client, redis: Redis) -> None:
    ws, cast_id = await start(client)
    await ws.send_str("not json")
    assert (await receive_json(ws))["error"] == "malformed_json"
    await ws.send_json({"type": "shout"})
    assert (await receive_json(ws))["error"] == "unknown_type"
    await ws.send_json({"type": "text", "text": 5})
    assert (await receive_json(ws))["error"] == "invalid_field"
    await ws.send_json({"type": "text", "text": "Still here."})
    await asyncio.sleep(0.1)
    assert (await text_of(redis, cast_id)).text == "Still here."
    await ws.close()


@pytest.mark.rule("session-end-closes")
async def test_a_client_that_disconnects_closes_the_text_so_the_cast_finishes(client: Client, redis: Redis) -> None:
    ws, cast_id = await start(client, keep=True)  # without keep, a disconnect cancels (test_intake_cancel.py)
    await ws.send_json({"type": "text", "text": "Half a sentence"})
    await asyncio.sleep(0.1)
    await ws.close()
    for _ in range(100):
        if (await text_of(redis, cast_id)).closed is not None:
            break
        await asyncio.sleep(0.02)
    text = await text_of(redis, cast_id)
    assert text.closed is not None and text.text == "Half a sentence"


async def test_an_idle_session_is_closed_with_its_position(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(live_idle_s=0.3)
    ws, cast_id = await start(client)
    assert (await receive_json(ws))["error"] == "idle"
    msg = await asyncio.wait_for(ws.receive(), 10)
    assert msg.type == aiohttp.WSMsgType.CLOSE and ws.close_code == 4408
    assert msgspec.json.decode(msg.extra) == {"error": "idle", "id": cast_id, "seq_num": 1}  # meta was read
    assert (await text_of(redis, cast_id)).closed is not None


async def test_a_client_that_reads_nothing_is_cut_off_and_its_cast_goes_on(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(live_send_timeout_s=0.3)
    store = CastStore(redis)
    ws, cast_id = await start(client)
    await ws.send_json({"type": "text", "text": "Some text."})
    big = b"\xff" * 256 * 1024
    for _ in range(8):  # 16 MB the client never reads: more than the socket buffers hold
        await worker_writes(store, cast_id, [("A sentence.", big)] * 8, end=False)

    async def text_closed() -> bool:
        return (await text_of(redis, cast_id)).closed is not None

    for _ in range(300):
        if await text_closed():
            break
        await asyncio.sleep(0.05)
    assert await text_closed()  # the session ended: its text is closed, so the cast finishes
    await ws.close()


# ---- per-client limits (#21) ---------------------------------------------------------------------


@pytest.mark.rule("live-metered")
async def test_a_client_holds_at_most_its_cap_of_open_casts(make_client: MakeClient, redis: Redis) -> None:
    """Finding 2 of #21: one address opened 12 live casts and held every live slot."""
    client = await make_client(live_max_open_per_client=2)
    first, _ = await open_live(client), await open_live(client)
    before = await keys_besides_rate_limits(redis)
    resp = await client.post("/api/casts", json={"live": True})
    assert (resp.status, (await resp.json())["error"]) == (429, "too_many_open_casts") and "Retry-After" in resp.headers
    assert await keys_besides_rate_limits(redis) == before  # nothing written
    other = await client.post("/api/casts", json={"live": True}, headers={"X-Forwarded-For": "203.0.113.9"})
    assert other.status == 201  # another client is not held back
    assert (await close(client, first)).status == 200
    await open_live(client)  # a closed cast frees its place


@pytest.mark.rule("live-metered")
async def test_live_text_flushes_and_closes_cost_the_clients_characters(make_client: MakeClient, redis: Redis) -> None:
    """Finding 5 of #21: the token was taken once per cast; fragments, flushes and closes were free."""
    client = await make_client(live_chars_per_min=120)  # 2 characters a second: no refill to speak of
    cast_id = await open_live(client)
    assert (await send(client, cast_id, "x" * 100, 0))[0] == 200
    status, body = await send(client, cast_id, "y" * 30, 100)
    assert (status, body["error"]) == (429, "rate_limited")
    assert (await text_of(redis, cast_id)).text == "x" * 100  # nothing appended
    flushes = [await send(client, cast_id, "", 100, flush=True) for _ in range(3)]
    assert [s for s, _ in flushes].count(429) >= 2  # a flush costs too (50)
    resp = await close(client, cast_id)
    assert resp.status == 429 and (await text_of(redis, cast_id)).closed is None
    other = await client.post("/api/casts", json={"live": True}, headers={"X-Forwarded-For": "203.0.113.9"})
    opened = await other.json()
    resp = await client.post(f"/api/casts/{opened['id']}/text", json={"text": "Hello.", "offset": 0},
                             headers={"Authorization": f"Bearer {opened['write_token']}", "X-Forwarded-For": "203.0.113.9"})
    assert resp.status == 200  # another client's text goes on


@pytest.mark.rule("live-metered")
async def test_sessions_count_per_client_once_started(make_client: MakeClient, redis: Redis) -> None:
    """Finding 4 of #21: the 256 sessions were global and counted before start."""
    client = await make_client(live_sessions_per_client=1)
    idle = [await client.ws_connect(WS) for _ in range(3)]  # not started: they hold no seat of the client's
    ws, _ = await start(client)
    second = await client.ws_connect(WS)
    await second.send_json({"type": "start"})
    assert (await receive_json(second))["error"] == "too_many_sessions"
    assert (await second.receive()).type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    assert second.close_code == 4503
    other = await client.ws_connect(WS, headers={"X-Forwarded-For": "203.0.113.9"})
    await other.send_json({"type": "start"})
    assert (await receive_json(other))["type"] == "cast"  # another client starts
    await ws.close()
    for _ in range(100):  # the seat is given back as the session ends
        if await redis.zcard("rl/intake-sessions/127.0.0.1") == 0:
            break
        await asyncio.sleep(0.02)
    again, _ = await start(client)
    for socket in (again, other, *idle):
        await socket.close()


@pytest.mark.rule("live-metered")
async def test_junk_frames_do_not_keep_an_idle_session(make_client: MakeClient, redis: Redis) -> None:
    """Finding 4 of #21: any frame reset the idle timer, so junk kept a session forever."""
    client = await make_client(live_idle_s=0.6)
    ws, cast_id = await start(client)
    loop = asyncio.get_running_loop()
    began = loop.time()
    while True:
        await ws.send_json({"type": "shout"})
        event = await receive_json(ws)
        if event["error"] == "idle":
            break
        assert loop.time() - began < 5, "junk kept the session open"
        await asyncio.sleep(0.1)
    while (await asyncio.wait_for(ws.receive(), 10)).type == aiohttp.WSMsgType.TEXT:
        pass  # the answers to junk still on the way
    assert ws.close_code == 4408 and (await text_of(redis, cast_id)).closed is not None


@pytest.mark.rule("live-metered")
async def test_sockets_before_start_count_in_no_session_cap_and_are_bounded_per_client(make_client: MakeClient) -> None:
    """Finding 4 of #21: the 256 sessions counted a socket before `start`, so one client's idle
    sockets could hold every session of the process."""
    client = await make_client(live_max_sessions=1)
    idle = [await client.ws_connect(WS) for _ in range(4)]  # a client's sockets that never start
    fifth = await client.ws_connect(WS)
    assert (await receive_json(fifth))["error"] == "busy"  # its fifth is refused
    other = await client.ws_connect(WS, headers={"X-Forwarded-For": "203.0.113.9"})
    await other.send_json({"type": "start"})
    assert (await receive_json(other))["type"] == "cast"  # the one session place was still free
    for socket in (other, fifth, *idle):
        await socket.close()


async def test_a_close_reads_the_text_log_once(client: Client, redis: Redis) -> None:
    """Finding 5 of #21: each /close read the whole text log twice."""
    cast_id = await open_live(client)
    await send(client, cast_id, "Some text. " * 50, 0)

    async def xranges() -> int:
        stats = await redis.info("commandstats")
        return int(stats.get("cmdstat_xrange", {}).get("calls", 0))

    before = await xranges()
    assert (await close(client, cast_id)).status == 200
    # the write token's check (the recipe), the log read once, the close script's look at the recipe
    assert await xranges() - before == 3


@pytest.mark.rule("ack-replicated")
async def test_an_open_no_replica_confirmed_is_503_and_holds_no_place(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(wait_replicas=1, wait_timeout_ms=20, live_max_open_per_client=1)  # no replica here
    resp = await client.post("/api/casts", json={"live": True})
    assert (resp.status, (await resp.json())["error"]) == (503, "busy")
    assert await redis.keys("rl/intake-live/*") == []  # its place among the client's open casts given back


@pytest.mark.rule("live-fair")
async def test_every_open_carries_its_clients_tag_to_the_worker_never_its_address(
    client: Client, redis: Redis
) -> None:
    """Synth serves open casts round robin by client: the open (HTTP and the WebSocket session alike) writes
    the opener's tag into the recipe, the same for every cast of one client, and not the address."""
    by_http = await open_live(client)
    ws, by_session = await start(client)
    away = await client.post("/api/casts", json={"live": True}, headers={"X-Forwarded-For": "203.0.113.9"})
    assert away.status == 201
    recipes = [await castlog.read_recipe(redis, c) for c in (by_http, by_session, (await away.json())["id"])]
    tags = [r.client for r in recipes if r is not None]
    assert tags[0] == tags[1] == castlog.client_tag("127.0.0.1") != tags[2] == castlog.client_tag("203.0.113.9")
    catalogs = [await redis.xrange(castlog.catalog_key(c)) for c in (by_http, by_session)]
    stored = [v for rows in catalogs for _, fields in rows for v in fields.values()]
    assert stored and not any(b"127.0.0.1" in v for v in stored)
    await ws.close()


async def until_cancelled(redis: Redis, cast_id: str) -> bool:
    """Whether the cast gets its cancel flag (a hang-up's cancel is on its way when the client is gone)."""
    for _ in range(250):
        if await castlog.is_cancelled(redis, cast_id):
            return True
        await asyncio.sleep(0.02)
    return False


@pytest.mark.rule("cancel-cuts-short")
async def test_a_client_that_hangs_up_after_close_cancels_what_is_not_yet_spoken(client: Client, redis: Redis) -> None:
    ws, cast_id = await start(client)
    await ws.send_json({"type": "text", "text": "Hello there. Goodbye."})
    await ws.send_json({"type": "close"})
    for _ in range(100):  # the close is taken: the text is complete, none of it spoken yet
        if (await text_of(redis, cast_id)).closed is not None:
            break
        await asyncio.sleep(0.02)
    await ws.close()
    assert await until_cancelled(redis, cast_id)


@pytest.mark.rule("live-metered")
async def test_pongs_to_the_servers_pings_do_not_keep_an_idle_session(make_client: MakeClient, redis: Redis) -> None:
    """Finding 2 of #35: aiohttp's receive(timeout) restarted at every pong, so a client that
    answers pings (as every client library does) and says nothing was held for ever."""
    client = await make_client(live_idle_s=0.6, live_ping_s=0.1)
    ws, cast_id = await start(client)
    event = await receive_json(ws)  # (aiohttp's client answers each ping while it waits here)
    assert event["error"] == "idle"
    assert (await asyncio.wait_for(ws.receive(), 10)).type == aiohttp.WSMsgType.CLOSE and ws.close_code == 4408
    assert (await text_of(redis, cast_id)).closed is not None


@pytest.mark.parametrize(("message", "code", "names"), [
    ({"type": "text", "text": 5}, "invalid_field", "$.text"),
    ({"type": "text", "text": "Hi.", "flush": "yes"}, "invalid_field", "$.flush"),
    ({"type": "shout"}, "unknown_type", "text, flush"),
    ({"text": "Hi."}, "unknown_type", "text, flush"),
    ([1, 2], "malformed_json", "JSON object"),
])
async def test_a_message_that_is_not_one_is_one_clear_error_and_the_session_goes_on(
    client: Client, redis: Redis, message: Any, code: str, names: str
) -> None:
    ws, cast_id = await start(client)
    await ws.send_json(message)
    error = await receive_json(ws)
    assert error["error"] == code and names in error["message"], error
    await ws.send_json({"type": "text", "text": "Still here."})
    for _ in range(250):
        if (await text_of(redis, cast_id)).text:
            break
        await asyncio.sleep(0.02)
    assert (await text_of(redis, cast_id)).text == "Still here."
    await ws.close()
