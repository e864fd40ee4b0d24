"""The live session over WebRTC: ``POST /v1/audio/speech/webrtc`` (an SDP offer) -> 201, the answer.

The offer carries a data channel labelled ``control`` and an audio transceiver the client receives
on. The data channel carries exactly the live WebSocket's JSON messages both ways (``livews.py``'s
session, over a ``Peer`` as its transport: a message in is a data channel message, a JSON event
out is one, a sentence's audio goes to the track); the audio track (``rtctrack.py``) plays
the cast's PCM as Opus, sentence after sentence, silence while waiting for text. Every session is
a live cast with a link, as on the WebSocket.

Where the WebSocket closes with a code, the data channel's last message is ``{"type": "closed",
"code", ...}`` with the same code and reason fields (after the queued audio played, on ``done``);
the client closes on it, and the server closes the peer connection then, or after
CLOSE_TIMEOUT_S, as a WebSocket's closing handshake does. ``{"type": "cancel"}`` stops the audio at once and ends the
session; the cast's text closes, so the cast still finishes for its link.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from functools import partial
from typing import Any

from aiohttp import web
from aiortc import RTCConfiguration, RTCDataChannel, RTCIceServer, RTCPeerConnection, RTCSessionDescription

from servicekit import ClientHolds

from ..claim import read_body
from ..config import Config
from ..context import INTAKE, request_client
from ..validate import Refusal
from . import livews
from .rtcports import NoFreePort, ShareFull, confine
from .rtctrack import SpeechTrack
from .session import CLOSE_TIMEOUT_S, encode, left

log = logging.getLogger(__name__)

CHANNEL = "control"
SDP = "application/sdp"
OPUS_RATE = 48_000
# Client messages not yet taken: a client that floods the channel past this gets errors, not memory.
INBOX = 256
# How long the last queued audio may take to play out after ``done`` before the connection closes.
PLAYOUT_MARGIN_S = 2.0
# The sessions' tasks (hold), referenced while they run.
HOLDS: set[asyncio.Future[None]] = set()


class Peer:
    """A live session's transport over a peer connection: the control channel's messages both
    ways, each sentence's PCM onto the track (``livews.Transport``)."""

    def __init__(self, app: web.Application, pc: RTCPeerConnection, track: SpeechTrack) -> None:
        self.app, self.pc, self.track = app, pc, track
        self.channel: RTCDataChannel | None = None
        self.inbox: asyncio.Queue[str | bytes | None] = asyncio.Queue(INBOX + 1)
        self.opened = asyncio.Event()
        self.channel_gone = asyncio.Event()  # the control channel closed
        self.closing = False
        self.stopped = False  # cancelled: nothing more goes out but "closed"
        self.since = time.monotonic()  # answered (the oldest unconnected offer is dropped first)
        self.ports = 0  # media ports taken of the client's share (Intake.webrtc_ports), given back at the end

    def take_port(self, client: str) -> bool:
        if self.app[INTAKE].webrtc_ports.take(client) is not None:
            return False
        self.ports += 1
        return True

    async def end(self, client: str) -> None:
        """Close the peer connection (its sockets) and give its ports back to the client's share."""
        self.track.stop()
        try:
            await asyncio.shield(self.pc.close())
        finally:
            for _ in range(self.ports):
                self.app[INTAKE].webrtc_ports.give(client)
            self.ports = 0

    def attach(self, channel: RTCDataChannel) -> None:
        if channel.label != CHANNEL or self.channel is not None:
            return
        self.channel = channel
        channel.on("message", self._take)
        channel.on("close", lambda: self.gone())
        if channel.readyState == "open":
            self.opened.set()
        channel.on("open", self.opened.set)

    def _take(self, message: str | bytes) -> None:
        cfg = self.app[INTAKE].cfg
        if self.inbox.qsize() >= INBOX or len(message) > cfg.live_max_message_bytes:
            with contextlib.suppress(ConnectionError):
                self._send_now({"type": "error", "error": "message_dropped",
                                "message": "too many messages at once, or one too large"})
            return
        self.inbox.put_nowait(message)

    def gone(self) -> None:
        self.opened.set()  # a waiter for the channel learns it is gone
        self.channel_gone.set()
        if not self.inbox.full():
            self.inbox.put_nowait(None)  # the peer left: as a WebSocket's disconnect (cancelled unless kept)

    def is_open(self) -> bool:
        return self.channel is not None and self.channel.readyState == "open"

    def _send_now(self, message: dict[str, Any]) -> None:
        if self.channel is None or not self.is_open():
            raise ConnectionError("the control channel is closed")
        self.channel.send(encode(message).decode())

    async def receive(self, until: float | None) -> str | bytes | None:
        if not self.is_open():
            return None
        return await asyncio.wait_for(self.inbox.get(), left(until))

    async def send_event(self, event: dict[str, Any]) -> None:
        if self.stopped:
            return
        if event.get("type") == "cast":  # the audio is the track's, whatever format was asked
            event = {**event, "format": "opus", "sample_rate": OPUS_RATE}
        self._send_now(event)

    async def send_audio(self, audio: bytes) -> None:
        if not self.stopped:
            await self.track.push(audio)

    def audio_format(self, asked: str) -> str:
        return "pcm"  # the audio track decodes each sentence's MP3 for the track

    def cancel(self) -> bool:
        """The audio stops now (the next frame is silence) and the session ends."""
        self.stopped = True
        self.track.clear()
        return True

    async def close(self, code: int, reason: dict[str, Any] | None) -> None:
        if self.closing:  # the audio track's end and a cancel may both close: the first one says why
            return
        self.closing = True
        if code == livews.CLOSE_DONE:  # the last sentences still play out first
            await self.track.played(self.track.queued_ms() / 1000 + PLAYOUT_MARGIN_S)
        with contextlib.suppress(ConnectionError, asyncio.TimeoutError):
            self._send_now({"type": "closed", "code": code, **(reason or {})})
            # the closing handshake: the client closes on "closed", so that message is not cut off
            await asyncio.wait_for(self.channel_gone.wait(), CLOSE_TIMEOUT_S)
        await self.pc.close()


async def run_session(session: livews.Session, peer: Peer) -> None:
    """The whole session: wait for the control channel, run it, close the connection."""
    timeout_s = session.app[INTAKE].cfg.webrtc_connect_timeout_s
    try:
        await asyncio.wait_for(peer.opened.wait(), timeout_s)
    except asyncio.TimeoutError:
        log.info("webrtc peer %s: no control channel within %g s", session.client, timeout_s)
    try:
        if peer.is_open():
            await session.run()
    finally:
        session.waiting.give()  # no longer waiting for start, whether it ran or its peer never came
        await session.app[INTAKE].session_seats.release(session.seat)
        await peer.end(session.client)


def ice_servers(cfg: Config) -> list[RTCIceServer]:
    """WEBRTC_ICE_SERVERS as aiortc takes them (none: host candidates only, what a LAN needs)."""
    return [RTCIceServer(urls=url, username=cfg.webrtc_turn_username or None,
                         credential=cfg.webrtc_turn_password) if url.startswith("turn")
            else RTCIceServer(urls=url) for url in cfg.webrtc_ice_servers]


def _waiting_full(waiting: ClientHolds) -> Refusal:
    return Refusal(429, "too_many_sessions", f"your address has {waiting.per_client} sessions waiting "
                      "for start (INTAKE_SESSIONS_WAITING_PER_CLIENT); start or end one first",
                      headers={"Retry-After": "1"})


async def _offer(request: web.Request) -> str:
    cfg = request.app[INTAKE].cfg
    if request.content_type != SDP:
        raise Refusal(415, "unsupported_media_type", f"send the SDP offer as {SDP}")
    if (request.content_length or 0) > cfg.webrtc_max_offer_bytes:
        raise Refusal(413, "offer_too_large", f"an offer is at most {cfg.webrtc_max_offer_bytes} bytes")
    body = await read_body(request)  # whole, however it is cut on the way, and within the body timeout
    if len(body) > cfg.webrtc_max_offer_bytes:
        raise Refusal(413, "offer_too_large", f"an offer is at most {cfg.webrtc_max_offer_bytes} bytes")
    sdp = body.decode("utf-8", "replace")
    if not sdp.startswith("v=0") or "m=audio" not in sdp or "m=application" not in sdp:
        raise Refusal(400, "invalid_offer", "send an SDP offer with an audio transceiver (recvonly) and a "
                      f"data channel labelled {CHANNEL!r}")
    return sdp


async def post_webrtc(request: web.Request) -> web.Response:
    intake = request.app[INTAKE]
    cfg, sessions = intake.cfg, intake.live_sessions
    sdp = await _offer(request)
    if len(sessions) >= cfg.live_max_sessions:
        raise Refusal(503, "busy", "too many live sessions; retry soon", headers={"Retry-After": "1"})
    client = request_client(request)
    # a client's offers whose peer has not started yet are capped as its WebSockets are: one
    # client's unanswered offers cannot hold every session and media port for the connect timeout
    if intake.session_waiting.full(client) is not None:
        raise _waiting_full(intake.session_waiting)
    try:
        peer, session = await _answer(request, sdp, client)
    except NoFreePort:
        try:  # once more, in the ports that dropping another client's unconnected offer frees
            if not await _make_room(request.app, client):
                raise
            peer, session = await _answer(request, sdp, client)
        except NoFreePort:
            raise Refusal(503, "busy", "no free media port; retry soon", headers={"Retry-After": "1"}) from None
    sessions.add(session)
    task = asyncio.ensure_future(run_session(session, peer))
    HOLDS.add(task)  # referenced while the session lives
    task.add_done_callback(HOLDS.discard)
    task.add_done_callback(lambda _: sessions.discard(session))
    return web.Response(status=201, text=peer.pc.localDescription.sdp, content_type=SDP)


async def _answer(request: web.Request, sdp: str, client: str) -> tuple[Peer, livews.Session]:
    """The answered peer connection and its session, counted as waiting; NoFreePort when the
    range has no port left (nothing kept)."""
    intake = request.app[INTAKE]
    cfg = intake.cfg
    pc = RTCPeerConnection(RTCConfiguration(iceServers=ice_servers(cfg)))
    track = SpeechTrack(cfg.webrtc_buffer_ms)
    peer = Peer(request.app, pc, track)
    session = livews.Session(request.app, client, peer)
    pc.on("datachannel", peer.attach)
    try:
        try:
            # aiortc's parser asserts on what it cannot read: any failure here is the offer's
            await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
        except Exception as exc:  # noqa: BLE001
            raise Refusal(400, "invalid_offer", f"the offer is not one this server can answer ({exc!r})") from None
        pc.addTrack(track)
        confine(pc, cfg.webrtc_udp_ports, cfg.webrtc_public_ip, partial(peer.take_port, client))
        try:
            await pc.setLocalDescription(await pc.createAnswer())
        except ShareFull:
            raise Refusal(429, "too_many_sessions", f"your address holds its {cfg.webrtc_ports_per_client} "
                          "media ports (WEBRTC_PORTS_PER_CLIENT); end a session first",
                          headers={"Retry-After": "1"}) from None
        # counted as one of the client's sessions waiting for start, as a WebSocket is (run() uncounts
        # it); the client's other offers may have come on meanwhile
        if session.waiting.take() is not None:
            raise _waiting_full(intake.session_waiting)
    except BaseException:
        await peer.end(client)
        raise
    return peer, session


async def _make_room(app: web.Application, client: str) -> bool:
    """The range is full: drop the oldest offer that never connected of the client holding the most
    ports, if it holds at least two more than ``client`` (#35: many addresses' unanswered offers
    held the range, and the next client was refused; now it is shared among those who ask)."""
    held = app[INTAKE].webrtc_ports.held
    mine = held.get(client, 0)
    waiting = [(s, s.transport) for s in app[INTAKE].live_sessions
               if isinstance(s, livews.Session) and isinstance(s.transport, Peer) and not s.transport.opened.is_set()]
    victims = [(s, peer) for s, peer in waiting if held.get(s.client, 0) > mine + 1]
    if not victims:
        return False
    session, peer = max(victims, key=lambda v: (held.get(v[0].client, 0), -v[1].since))
    log.info("webrtc: no free media port; dropping an unconnected offer of a client holding %d",
             held.get(session.client, 0))
    await peer.end(session.client)
    peer.gone()  # its hold wakes and ends (the waiting count, the session)
    return True
