"""What every speech session shares, whatever its protocol (live WebSocket, WebRTC, ``/v1/speak``,
Wyoming): the open cast it feeds (``OpenCast``), the answers that go out one after another while
the client is read (``InOrder``: ``/v1/speak``'s turns, Wyoming's requests), the client's
messages read by a deadline that only its own messages move, and a WebSocket's frames
(``Socket``: the live socket's and ``/v1/speak``'s). A connection that has sent nothing
yet holds a waiting place (a ``servicekit.Hold`` in ``Intake.session_waiting``, one pool for
every protocol: INTAKE_SESSIONS_WAITING_PER_CLIENT), taken at the upgrade or offer, given back
at the first message or the end, whichever comes first.

aiohttp's ``receive(timeout)`` restarts its timeout at every pong answering the server's own
heartbeat, so a client that answers pings and says nothing would be held for ever: here the
deadline is a loop time, and the wait for the next message is bounded by what is left of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web

from castlog import cancel
from servicekit import encode_json as encode  # livews, speak and webrtc take it from here

from .. import live
from ..context import INTAKE, LiveSession

log = logging.getLogger(__name__)

CLOSED = (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR)
# Connections of every client together that have sent nothing yet (a socket and a few KiB each):
# apart from the session caps, so that they never keep a started session out.
MAX_WAITING = 4096
# How long a WebSocket's closing handshake may take before the connection is dropped.
CLOSE_TIMEOUT_S = 2.0



def deadline(after_s: float) -> float:
    """The loop time ``after_s`` from now."""
    return asyncio.get_running_loop().time() + after_s


def left(until: float | None) -> float | None:
    """Seconds left until the loop time ``until`` (None: no limit)."""
    return None if until is None else max(0.0, until - asyncio.get_running_loop().time())


class SlowClient(Exception):
    """The client took no frame for INTAKE_LIVE_SEND_TIMEOUT_S."""


class Socket:
    """A session's WebSocket (and the live session's transport, ``livews.Transport``): the
    client's next message by a deadline, frames out one at a time within the send timeout, the close."""

    def __init__(self, ws: web.WebSocketResponse, send_timeout_s: float) -> None:
        self.ws, self.send_timeout_s = ws, send_timeout_s
        self._send_lock = asyncio.Lock()

    async def receive(self, until: float | None) -> str | bytes | None:
        """The client's next message by the loop time ``until`` (None: no limit; pings and pongs do
        not count): text, anything else as bytes, None once the client is gone; asyncio.TimeoutError past it."""
        msg = await asyncio.wait_for(self.ws.receive(), left(until))
        if msg.type in CLOSED:
            return None
        return msg.data if msg.type == WSMsgType.TEXT else b""

    async def _send(self, frame: Awaitable[None]) -> None:
        async with self._send_lock:
            try:
                await asyncio.wait_for(frame, self.send_timeout_s)
            except asyncio.TimeoutError:
                raise SlowClient from None

    async def send_event(self, event: dict[str, Any]) -> None:
        await self._send(self.ws.send_str(encode(event).decode()))

    async def send_audio(self, audio: bytes) -> None:
        await self._send(self.ws.send_bytes(audio))

    def audio_format(self, asked: str) -> str:
        return asked

    def cancel(self) -> bool:
        return False

    async def close(self, code: int, reason: dict[str, Any] | None = None) -> None:
        """Close with ``code``; a client that does not answer within CLOSE_TIMEOUT_S is dropped."""
        message = encode(reason)[:123] if reason else b""  # a close frame carries 123 bytes of reason
        with suppress(asyncio.TimeoutError, ConnectionError):
            await asyncio.wait_for(self.ws.close(code=code, message=message), CLOSE_TIMEOUT_S)


async def serve(request: web.Request, session_on: Callable[[Socket], LiveSession], busy: dict[str, Any],
                code: int) -> web.WebSocketResponse:
    """A WebSocket session (the live socket's, ``/v1/speak``'s): the upgrade, then ``busy`` and the
    close with ``code`` when INTAKE_LIVE_MAX_SESSIONS are open or the client's waiting places are
    all taken; else the session runs, and then gives back its place, its seat and its count."""
    intake = request.app[INTAKE]
    cfg = intake.cfg
    ws = web.WebSocketResponse(heartbeat=cfg.live_ping_s, max_msg_size=cfg.live_max_message_bytes)
    await ws.prepare(request)
    session = session_on(Socket(ws, cfg.live_send_timeout_s))
    if len(intake.live_sessions) >= cfg.live_max_sessions or session.waiting.take() is not None:
        await ws.send_str(encode(busy).decode())
        await ws.close(code=code)
        return ws
    try:
        await session.run()
    finally:
        intake.live_sessions.discard(session)
        session.waiting.give()
        await intake.session_seats.release(session.seat)
    return ws


@dataclass(eq=False)
class OpenCast:
    """One open cast a session feeds, whatever its protocol (a live session's, a ``/v1/speak``
    turn's, a Wyoming request's): open it, say fragments and flushes, close its text, cancel it."""

    app: web.Application
    client: str
    cast_id: str = ""
    voice: str = ""
    offset: int = 0  # characters sent so far: the next fragment's offset
    text_open: bool = False
    ended: bool = False  # its log ended (eos or error): nothing is left to cut short

    @classmethod
    async def open(cls, app: web.Application, client: str, voice: str | None, title: str | None,
                   speed: float = 1.0) -> tuple[OpenCast, str]:
        """A new open cast, and the write token that the live WebSocket hands its client."""
        opened = await live.open_cast(app, client, voice, title, speed)
        return cls(app, client, opened.cast_id, opened.voice, text_open=True), opened.write_token

    async def say(self, text: str, *, flush: bool = False) -> None:
        """One fragment (and a flush) at the text's end; a Refusal when the text log refuses it."""
        _, self.offset = await live.add_text(self.app, self.cast_id, self.offset, text, flush, client=self.client)

    async def close(self) -> None:
        """The text is complete, the rest is spoken (at most once; a refused close is logged: the
        worker closes a text left open)."""
        if not self.text_open:
            return
        self.text_open = False
        try:
            await live.close_text(self.app, self.cast_id, self.voice)
        except live.TextRefusal as refusal:
            log.warning("cast %s: close refused (%s)", self.cast_id, refusal.message)

    async def cancel(self) -> None:
        """Cut short: the text not yet spoken is dropped and the worker stops at the chunk in hand."""
        self.text_open = False
        if self.cast_id and not self.ended:
            await cancel(self.app[INTAKE].redis, self.cast_id)


class InOrder:
    """A session's answers, each one cast's audio going out after the one before it, while the
    client's next messages are read (``/v1/speak``'s turns, Wyoming's requests). ``cut`` (a
    barge-in, a hang-up) stops every answer not yet out and cuts its cast short."""

    def __init__(self, most: int) -> None:
        self.most = most  # answers in hand at once
        self.held: list[tuple[asyncio.Task[None], OpenCast | None]] = []
        self.failed: BaseException | None = None  # the first answer that broke (its client went away)

    def full(self) -> bool:
        return len(self.held) >= self.most

    def busy(self) -> set[asyncio.Task[None]]:
        return {task for task, _ in self.held if not task.done()}

    def add(self, cast: OpenCast | None, answer: Callable[[], Awaitable[None]]) -> None:
        """``answer`` runs once every answer before it has ended."""
        before = self.held[-1][0] if self.held else None
        entry = (asyncio.ensure_future(self._after(before, answer)), cast)
        self.held.append(entry)
        entry[0].add_done_callback(lambda task: self._ended(entry))

    @staticmethod
    async def _after(before: asyncio.Task[None] | None, answer: Callable[[], Awaitable[None]]) -> None:
        if before is not None:
            await asyncio.wait({before})
        await answer()

    def _ended(self, entry: tuple[asyncio.Task[None], OpenCast | None]) -> None:
        if entry in self.held:
            self.held.remove(entry)
        task = entry[0]
        if not task.cancelled() and task.exception() is not None and self.failed is None:
            self.failed = task.exception()

    async def room(self) -> None:
        """Back once fewer than ``most`` answers are in hand (a client that asks faster than they are
        spoken waits)."""
        while self.full():
            await asyncio.wait({self.held[0][0]})

    async def done(self) -> None:
        """Back once every answer is out; the error of one that broke."""
        while self.held:
            await asyncio.wait({self.held[-1][0]})
        if self.failed is not None:
            raise self.failed

    async def cut(self, cast: OpenCast | None = None, *, cancel: bool = True) -> None:
        """Every answer not yet out (``cast``'s alone, if given) stops now, and its cast is cut
        short unless ``cancel`` is False (a stop: the casts go on)."""
        entries = [e for e in self.held if cast is None or e[1] is cast]
        for entry in entries:
            self.held.remove(entry)
            entry[0].cancel()
        await asyncio.gather(*(task for task, _ in entries), return_exceptions=True)
        for _, held in entries:
            if held is not None and cancel:
                await held.cancel()
