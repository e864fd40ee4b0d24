"""The live session over WebRTC through intake's real app, with a real aiortc peer on loopback
UDP: the offer and its refusals, the control channel's messages (the WebSocket's), the track's
audio for records written as a worker writes them (a tone's MP3), cancel, three sessions at once,
and the media ports (the model's own run is in tests/system/test_webrtc.py)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import numpy as np
import pytest
from aiohttp.test_utils import TestClient
from aiortc import RTCPeerConnection
from redis.asyncio import Redis

import castlog
from castlog import CastStore, LiveStore, LiveText
from intake.context import INTAKE
from synth.mp3 import encode_chunk
from tests.support.rtcpeer import LOUD, SDP, Peer, connect, offer

from .conftest import MakeClient, keys_besides_rate_limits
from .test_intake_live import until_cancelled, worker_writes

Client = TestClient[Any, Any]
ROUTE = "/v1/audio/speech/webrtc"


def tone_mp3(seconds: float) -> bytes:
    t = np.arange(int(24_000 * seconds)) / 24_000
    return bytes(encode_chunk((0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 48_000).data)


def candidate_ports(sdp: str) -> list[tuple[str, int, str]]:
    return [(m[0], int(m[1]), m[2]) for m in re.findall(r"a=candidate:\S+ \d+ udp \d+ (\S+) (\d+) typ (\w+)", sdp)]


async def closed_text(redis: Redis, cast_id: str) -> LiveText:
    """The cast's text once it is closed (the session's messages are on their way until then)."""
    for _ in range(500):
        text = await LiveStore(redis).read_text(cast_id)
        if text is not None and text.closed is not None:
            return text
        await asyncio.sleep(0.02)
    raise AssertionError(f"the text of {cast_id} never closed")


async def started(client: Client, **fields: Any) -> tuple[Peer, str]:
    peer = await connect(client.post, ROUTE)
    peer.send({"type": "start", **fields})
    event = await peer.next()
    assert event["type"] == "cast" and event["url"] == f"/c/{event['id']}"
    assert (event["format"], event["sample_rate"]) == ("opus", 48_000)
    return peer, str(event["id"])


@pytest.mark.rule("webrtc-same-session")
async def test_a_session_writes_text_and_plays_each_sentence_then_done(client: Client, redis: Redis) -> None:
    peer, cast_id = await started(client, voice="af_heart")
    try:
        peer.send({"type": "text", "text": "Hello th"})
        peer.send({"type": "text", "text": "ere. How are"})
        peer.send({"type": "flush"})
        peer.send({"type": "close"})
        text = await closed_text(redis, cast_id)
        assert text.text == "Hello there. How are"
        assert [e.kind for e in text.events] == ["text", "text", "flush", "closed"]
        assert text.client == castlog.client_tag("127.0.0.1")  # the worker serves open casts by client
        await peer.heard(10)
        assert peer.loud() == []  # silence, not an ended track, while no audio is there
        first = time.monotonic()
        await worker_writes(CastStore(redis), cast_id, [("Hello there.", tone_mp3(0.6)), ("How are", tone_mp3(0.4))],
                            end=True)
        got = await peer.until("closed")
        assert got == [
            {"type": "sentence", "index": 0, "text": "Hello there."},
            {"type": "sentence_done", "index": 0, "duration_ms": 24},
            {"type": "sentence", "index": 1, "text": "How are"},
            {"type": "sentence_done", "index": 1, "duration_ms": 48},
            {"type": "done", "sentences": 2, "audio_ms": 0},
            {"type": "closed", "code": 1000},
        ]
        # one second of tone in 20 ms frames, the two sentences back to back: between the first
        # loud frame and the last only the MP3 chunks' edge padding is quiet, no gap of silence
        played = [f.rms > LOUD for f in peer.frames if f.at >= first]
        start, end = played.index(True), len(played) - played[::-1].index(True)
        assert 40 <= sum(played) <= 56 and played[start:end].count(False) <= 6
    finally:
        await peer.close()


@pytest.mark.rule("webrtc-cancel-stops")
async def test_cancel_stops_the_audio_and_cancels_the_cast(client: Client, redis: Redis) -> None:
    peer, cast_id = await started(client)
    try:
        peer.send({"type": "text", "text": "A long tone. Another."})
        # the second sentence waits for room behind the first (WEBRTC_BUFFER_MS): a cancel drops it too
        tones = [("A long tone.", tone_mp3(3.0)), ("Another.", tone_mp3(3.0))]
        await worker_writes(CastStore(redis), cast_id, tones, end=False)
        assert (await peer.next())["type"] == "sentence"
        await peer.heard(10, loud=True)
        before = len(peer.loud())
        peer.send({"type": "cancel"})
        closed = await peer.until("closed")
        last = closed[-1]
        assert last == {"type": "closed", "code": 1000, "cancelled": True, "id": cast_id, "seq_num": last["seq_num"]}
        assert last["seq_num"] in (3, 4)  # after the first sentence, or the second (not played)
        assert [m["type"] for m in closed[:-1]] in ([], ["sentence_done"], ["sentence_done", "sentence"])
        assert await castlog.is_cancelled(redis, cast_id)  # the cast itself is cut short, as the WebSocket's
        await asyncio.sleep(0.5)
        # six seconds of tone (300 frames) were on their way: after the cancel only the frames already
        # in flight (the client's jitter buffer, the cancel's way over) play, then nothing
        assert len(peer.loud()) - before <= 25
    finally:
        await peer.close()


async def test_three_sessions_at_once_each_hear_their_own_cast(client: Client, redis: Redis) -> None:
    sessions = [await started(client) for _ in range(3)]
    try:
        casts = {cast_id for _, cast_id in sessions}
        assert len(casts) == 3
        for peer, _ in sessions:
            peer.send({"type": "text", "text": "Tone."})
            peer.send({"type": "close"})
        await asyncio.gather(*(worker_writes(CastStore(redis), cast_id, [("Tone.", tone_mp3(0.5))], end=True)
                               for _, cast_id in sessions))
        for peer, _ in sessions:
            got = await peer.until("closed")
            assert [m["type"] for m in got] == ["sentence", "sentence_done", "done", "closed"]
            assert len(peer.loud()) >= 20
    finally:
        for peer, _ in sessions:
            await peer.close()


@pytest.mark.rule("webrtc-ports")
async def test_media_stays_inside_the_configured_ports(make_client: MakeClient) -> None:
    client = await make_client(webrtc_udp_ports=(41200, 41203), webrtc_public_ip="203.0.113.7")
    peers = [await connect(client.post, ROUTE) for _ in range(2)]
    try:
        for peer in peers:
            found = candidate_ports(peer.answer)
            assert found and all(41200 <= port <= 41203 for _, port, _ in found)
            hosts = {port for _, port, kind in found if kind == "host"}
            assert ("203.0.113.7", "srflx") in {(host, kind) for host, _, kind in found}
            assert {port for host, port, kind in found if host == "203.0.113.7"} <= hosts
            # the pair in use: our end is one of those sockets
            pair = peer.pc.getTransceivers()[0].receiver.transport.transport._connection._nominated[1]
            assert 41200 <= pair.remote_candidate.port <= 41203
        assert len({p for peer in peers for _, p, _ in candidate_ports(peer.answer)}) >= 2
    finally:
        for peer in peers:
            await peer.close()


@pytest.mark.rule("webrtc-ports")
async def test_no_free_port_is_busy_and_the_session_cap_holds(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(webrtc_udp_ports=(41210, 41210), live_max_sessions=5)
    first = await connect(client.post, ROUTE)
    pc = RTCPeerConnection()
    try:
        sdp, _ = await offer(pc)
        resp = await client.post(ROUTE, data=sdp, headers={"Content-Type": SDP})
        assert resp.status == 503 and (await resp.json())["error"]["code"] == "busy"
        capped = await make_client(live_max_sessions=1)
        held = await connect(capped.post, ROUTE)
        resp = await capped.post(ROUTE, data=sdp, headers={"Content-Type": SDP})
        assert resp.status == 503 and resp.headers["Retry-After"] == "1"
        await held.close()
    finally:
        await pc.close()
        await first.close()
    assert await keys_besides_rate_limits(redis) == set()


async def test_bad_offers_are_refused_and_leave_no_trace(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(webrtc_max_offer_bytes=8000, api_keys=frozenset({"k1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}))
    auth = {"Authorization": "Bearer k1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}
    pc = RTCPeerConnection()
    try:
        sdp_without_channel, _ = await offer(pc, channel=False)
    finally:
        await pc.close()
    cases = [
        ({"Content-Type": SDP}, "v=0\r\n", 401),  # the same keys as every /v1 route
        ({"Content-Type": "application/json", **auth}, "{}", 415),
        ({"Content-Type": SDP, **auth}, "hello", 400),
        ({"Content-Type": SDP, **auth}, sdp_without_channel, 400),
        ({"Content-Type": SDP, **auth}, "v=0\r\nm=audio m=application" + "x" * 9000, 413),
        ({"Content-Type": SDP, **auth}, "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nm=application\r\n", 400),
    ]
    for headers, body, status in cases:
        resp = await client.post(ROUTE, data=body, headers=headers)
        assert resp.status == status, (body[:40], await resp.text())
        assert set((await resp.json())["error"]) >= {"message", "code"}  # OpenAI's shape, as on /v1
    assert await keys_besides_rate_limits(redis) == set()


async def test_an_offer_that_comes_in_pieces_is_read_whole(client: Client) -> None:
    pc = RTCPeerConnection()
    try:
        sdp, _ = await offer(pc)

        async def pieces() -> Any:
            yield sdp[: len(sdp) // 2].encode()
            await asyncio.sleep(0.2)  # the network's pause between two segments
            yield sdp[len(sdp) // 2 :].encode()

        resp = await client.post(ROUTE, data=pieces(), headers={"Content-Type": SDP})
        answer = await resp.text()
        assert resp.status == 201, answer  # the first piece alone was an invalid offer (400)
        assert answer.startswith("v=0")
    finally:
        await pc.close()


@pytest.mark.rule("webrtc-same-session")
async def test_a_bad_start_gets_the_websockets_error_and_leaves_no_trace(client: Client, redis: Redis) -> None:
    peer = await connect(client.post, ROUTE)
    try:
        peer.send({"type": "start", "voice": "nobody"})
        got = await peer.until("closed")
        assert got[0]["type"] == "error" and got[-1] == {"type": "closed", "code": 4400}
    finally:
        await peer.close()
    assert await keys_besides_rate_limits(redis) == set()


@pytest.mark.parametrize("raw", ["40000-40100", "5000"])
def test_the_port_range_setting_reads_first_last(raw: str) -> None:
    from intake.config import port_range

    assert port_range(raw) == ((40000, 40100) if "-" in raw else (5000, 5000))
    for bad in ("0-10", "10-5", "a-b", "70000"):
        with pytest.raises(ValueError):
            port_range(bad)


async def test_one_clients_unanswered_offers_are_capped_as_its_waiting_sockets(
    make_client: MakeClient, redis: Redis
) -> None:
    """Offers whose peer never starts hold a session and a port each until WEBRTC_CONNECT_TIMEOUT_S:
    one client holds at most INTAKE_SESSIONS_WAITING_PER_CLIENT of them, so it cannot fill the process's
    live sessions for everyone; another address is not refused."""
    client = await make_client(live_max_sessions=10)
    waiting = client.app[INTAKE].cfg.sessions_waiting_per_client
    pc = RTCPeerConnection()
    try:
        sdp, _ = await offer(pc)
        statuses = [(await client.post(ROUTE, data=sdp, headers={"Content-Type": SDP})).status
                    for _ in range(waiting + 1)]
        assert statuses == [201] * waiting + [429]
        resp = await client.post(ROUTE, data=sdp, headers={"Content-Type": SDP})
        assert resp.status == 429 and (await resp.json())["error"]["code"] == "too_many_sessions"
        other = await client.post(ROUTE, data=sdp, headers={"Content-Type": SDP, "X-Forwarded-For": "203.0.113.9"})
        assert other.status == 201
    finally:
        await pc.close()
    assert await keys_besides_rate_limits(redis) == set()


@pytest.mark.rule("webrtc-ports")
async def test_one_client_holds_only_its_share_of_the_media_ports(make_client: MakeClient, redis: Redis) -> None:
    """Unanswered offers from one address take at most WEBRTC_PORTS_PER_CLIENT of the range (#35: a
    few addresses' waiting offers held all of it): its next offer is 429, another address's is answered
    with ports of the range."""
    pc = RTCPeerConnection()
    try:
        sdp, _ = await offer(pc)
        # four ports (on each host address): one client's four waiting offers (its waiting cap) took them all
        client = await make_client(webrtc_udp_ports=(41230, 41233), live_max_sessions=10, webrtc_ports_per_client=2)
        statuses = [(await client.post(ROUTE, data=sdp, headers={"Content-Type": SDP})).status for _ in range(2)]
        assert statuses == [201, 201]
        resp = await client.post(ROUTE, data=sdp, headers={"Content-Type": SDP})
        assert resp.status == 429 and (await resp.json())["error"]["code"] == "too_many_sessions"
        assert client.app[INTAKE].webrtc_ports.held == {"127.0.0.1": 2}
        other = await client.post(ROUTE, data=sdp, headers={"Content-Type": SDP, "X-Forwarded-For": "203.0.113.9"})
        assert other.status == 201, await other.text()
        found = candidate_ports(await other.text())
        assert found and all(41230 <= port <= 41233 for _, port, _ in found)
    finally:
        await pc.close()
    assert await keys_besides_rate_limits(redis) == set()


@pytest.mark.rule("webrtc-ports")
async def test_a_full_range_drops_an_unconnected_offer_of_the_client_holding_most(
    make_client: MakeClient, redis: Redis
) -> None:
    """#35 item 10: unanswered offers from a few addresses held the whole range and the next client
    got 503. When the range is full, an offer is answered in the place of the oldest unconnected offer
    of a client holding at least two more ports than the asker; among equals, 503 `busy`."""
    client = await make_client(webrtc_udp_ports=(41240, 41241), live_max_sessions=10)
    pc = RTCPeerConnection()
    try:
        sdp, _ = await offer(pc)
        first = await client.post(ROUTE, data=sdp, headers={"Content-Type": SDP})
        second = await client.post(ROUTE, data=sdp, headers={"Content-Type": SDP})
        assert (first.status, second.status) == (201, 201)
        resp = await client.post(ROUTE, data=sdp, headers={"Content-Type": SDP})
        assert resp.status == 503 and (await resp.json())["error"]["code"] == "busy"  # its own offers stay
        other = await client.post(ROUTE, data=sdp, headers={"Content-Type": SDP, "X-Forwarded-For": "203.0.113.9"})
        assert other.status == 201, await other.text()
        assert client.app[INTAKE].webrtc_ports.held == {"127.0.0.1": 1, "203.0.113.9": 1}
        # the oldest was dropped: its ports are the newcomer's
        ports = {port for _, port, kind in candidate_ports(await first.text()) if kind == "host"}
        assert ports == {port for _, port, kind in candidate_ports(await other.text()) if kind == "host"}
        third = await client.post(ROUTE, data=sdp, headers={"Content-Type": SDP, "X-Forwarded-For": "203.0.113.10"})
        assert third.status == 503
    finally:
        await pc.close()
    assert await keys_besides_rate_limits(redis) == set()


async def test_a_peer_that_never_connects_is_dropped(make_client: MakeClient, redis: Redis) -> None:
    """An offer whose peer never takes the answer holds its session and port only until
    WEBRTC_CONNECT_TIMEOUT_S; no cast was opened."""
    client = await make_client(webrtc_connect_timeout_s=0.3)
    pc = RTCPeerConnection()
    try:
        sdp, _ = await offer(pc)
        resp = await client.post(ROUTE, data=sdp, headers={"Content-Type": SDP})
        assert resp.status == 201
        sessions = client.app[INTAKE].live_sessions
        assert len(sessions) == 1
        for _ in range(250):
            if not sessions:
                break
            await asyncio.sleep(0.02)
        assert not sessions
        assert not client.app[INTAKE].session_waiting.held, "a dropped offer no longer counts as waiting"
        assert not client.app[INTAKE].webrtc_ports.held, "its media ports are the client's again"
    finally:
        await pc.close()
    assert await keys_besides_rate_limits(redis) == set()


@pytest.mark.rule("webrtc-same-session")
async def test_a_stop_closes_the_text_and_says_going_away(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client()
    peer, cast_id = await started(client)
    try:
        peer.send({"type": "text", "text": "Half a sent"})
        for _ in range(500):  # the fragment in the text log before the stop
            text = await LiveStore(redis).read_text(cast_id)
            if text is not None and text.text:
                break
            await asyncio.sleep(0.02)
        await client.close()  # intake stops: every live session ends its text and closes
        assert (await peer.until("closed"))[-1] == {"type": "closed", "code": 1001}
        assert (await closed_text(redis, cast_id)).text == "Half a sent"
    finally:
        await peer.close()


async def test_a_peer_that_hangs_up_after_close_cancels_what_is_not_yet_spoken(client: Client, redis: Redis) -> None:
    peer, cast_id = await started(client)
    try:
        peer.send({"type": "text", "text": "An answer nobody will hear."})
        peer.send({"type": "close"})
        await closed_text(redis, cast_id)
    finally:
        await peer.close()
    assert await until_cancelled(redis, cast_id)
