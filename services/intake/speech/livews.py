"""The live WebSocket: ``GET /v1/audio/speech/live``, one open cast per connection.

Two tracks that never wait for each other: the *text track* takes the client's JSON messages
(``start``, then ``text`` fragments, ``flush``, ``close``) and writes them to the text log; the
*audio track* follows the cast log through intake's shared tail (``fanout.Tail``) and sends each
sentence's audio as a binary frame, between JSON events (``cast``, ``sentence``,
``sentence_done``, ``done``, ``error``). The audio track takes the next record only after the
client took the last one, so a client that does not read costs one bounded listener queue (a
full one goes back to reading by offset), not a buffer; one that takes no frame for
INTAKE_LIVE_SEND_TIMEOUT_S is cut off with the ``seq_num`` to resume listening from (by link).
The session stays open across sentences; a session that ends without ``close`` (the idle limit,
a slow client, a stop) closes the cast's text, so the cast still finishes. ``cancel`` (barge-in)
drops the text not yet spoken and ends the cast at the chunk in hand; a client that disconnects
mid-cast cancels it too, unless its ``start`` asked to ``keep`` it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

import msgspec
from aiohttp import web

from castlog import SAMPLE_RATE, Audio, Eos, Error
from castlog.slots import Seat
from servicekit import Hold, forms

from ..claim import cast_url
from ..context import INTAKE, request_client
from ..validate import Refusal
from .formats import Converter, converter
from .livemessages import Invalid, decode_message
from .session import OpenCast, SlowClient, deadline, serve
from .stream import convert_chunk

log = logging.getLogger(__name__)

ROUTE = "/v1/audio/speech/live"
# Close codes: done, a stop, the client's mistake, the idle limit, a slow text_in, the session cap.
CLOSE_DONE, CLOSE_GOING_AWAY = 1000, 1001
CLOSE_BAD_REQUEST, CLOSE_IDLE, CLOSE_SLOW_READER, CLOSE_BUSY = 4400, 4408, 4429, 4503
LISTENER_KIND = "live"  # streamtts_intake_listeners{kind}

class Transport(Protocol):
    """What carries a live session: a WebSocket (``session.Socket``) or a peer connection's data
    channel and audio track (``webrtc.py``)."""

    async def receive(self, until: float | None) -> str | bytes | None:
        """The next message: text, anything else (bytes), None once the client is gone;
        asyncio.TimeoutError past the loop time ``until`` (pongs do not move it)."""

    async def send_event(self, event: dict[str, Any]) -> None:
        """One JSON event (SlowClient when the client makes no room for it in time)."""

    async def send_audio(self, audio: bytes) -> None:
        """One sentence's audio in the session's format."""

    def audio_format(self, asked: str) -> str:
        """The format the audio track hands ``send_audio``, for the one the client asked for."""

    def cancel(self) -> bool:
        """The client cancelled: whether that ends the session now (WebRTC stops its audio at
        once), or ``done`` with ``cancelled`` follows (WebSocket)."""

    async def close(self, code: int, reason: dict[str, Any] | None) -> None: ...


class Session:
    """One live session, whatever carries it (``Transport``)."""

    def __init__(self, app: web.Application, client: str, transport: Transport) -> None:
        self.app, self.client, self.transport = app, client, transport
        self.cast = OpenCast(app, client)  # opened by start
        self.convert: Converter = converter("mp3")  # the MP3 as it is, or its PCM
        self.seq_num = 0  # the next record of the cast log the client has not had
        self.keep = False  # the cast goes on when the client disconnects (else it is cancelled)
        self.gone = False  # the client closed or dropped the connection
        self.seat: Seat | None = None  # the client's session seat, held from start to the end
        # one of the client's sockets before start (they count in no session cap until then)
        self.waiting = Hold(self.app[INTAKE].session_waiting, self.client)
        self.cancelled = False  # a cancel ended the session (on a transport whose cancel ends it)

    # ---- sending -------------------------------------------------------------------------------

    async def error(self, code: str, message: str) -> None:
        await self.transport.send_event({"type": "error", "error": code, "message": message})

    async def refuse(self, refusal: Refusal) -> None:
        """A refusal as an ``error`` event: its code, message and the fields of its kind (a text
        refusal's ``offset``)."""
        await self.transport.send_event({"type": "error", **msgspec.structs.asdict(refusal.body())})

    async def close(self, code: int, reason: dict[str, Any] | None = None) -> None:
        if self.cancelled:  # whatever ended it after, the client learns it was a cancel
            code, reason = CLOSE_DONE, {"cancelled": True, "id": self.cast.cast_id, "seq_num": self.seq_num}
        await self.transport.close(code, reason)

    # ---- the session ---------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            if await self._start():
                await self._tracks()
                if self.cancelled:
                    await self.close(CLOSE_DONE)
        except SlowClient:
            await self.end_text()
            log.info("live cast %s: slow reader cut off at seq_num %d", self.cast.cast_id, self.seq_num)
            await self.close(CLOSE_SLOW_READER, {"error": "slow_reader", "id": self.cast.cast_id, "seq_num": self.seq_num})
        except ConnectionError:
            self.gone = True
        except asyncio.CancelledError:
            self.gone = True  # the client dropped the connection (aiohttp cancels its handler)
            raise
        finally:
            if self.gone and not self.keep and not self.cast.ended:  # cancelled, unless kept (a stop keeps every cast)
                await asyncio.shield(self.cast.cancel())
            await asyncio.shield(self.end_text())  # else (kept, failed) the text ends, the cast finishes

    async def _start(self) -> bool:
        """The first message must be ``start``; then the client's session seat; answer with the
        ``cast`` event."""
        intake = self.app[INTAKE]
        msg = await self._receive(deadline(intake.cfg.live_idle_s))
        if msg is None:
            return False
        self.waiting.give()
        if isinstance(msg, Invalid) and msg.code == "invalid_field":  # a start with a field of the wrong type
            return await self._refuse_start(Refusal(422, msg.code, msg.message))
        if not isinstance(msg, forms.StartMessage):
            message = 'send {"type": "start", "voice", "speed", "format"} first'
            return await self._refuse_start(Refusal(400, "expected_start", message))
        if len(intake.live_sessions) >= intake.cfg.live_max_sessions:
            return await self._refuse_start(Refusal(503, "busy", "too many live sessions; retry soon"), CLOSE_BUSY)
        intake.live_sessions.add(self)  # a started session: the process-wide cap counts it
        self.seat, _ = await intake.session_seats.acquire(self.client)
        if self.seat is None:
            message = f"your address has {intake.session_seats.cap} live sessions open; end one first"
            return await self._refuse_start(Refusal(429, "too_many_sessions", message), CLOSE_BUSY)
        fmt = msg.format or "mp3"
        try:
            if fmt not in forms.LIVE_FORMATS:
                raise Refusal(422, "invalid_format", f"format must be one of {', '.join(forms.LIVE_FORMATS)}")
            self.cast, write_token = await OpenCast.open(self.app, self.client, msg.voice, msg.title, msg.speed)
        except Refusal as refusal:
            return await self._refuse_start(refusal)
        self.convert, self.keep = converter(self.transport.audio_format(fmt)), msg.keep
        await self.transport.send_event({
            "type": "cast", "id": self.cast.cast_id, "url": cast_url(self.cast.cast_id), "voice": self.cast.voice,
            "format": fmt, "sample_rate": SAMPLE_RATE, "write_token": write_token,
        })
        return True

    async def _refuse_start(self, refusal: Refusal, code: int = CLOSE_BAD_REQUEST) -> bool:
        """No session: the refusal as an ``error`` event, then the close with ``code``."""
        await self.refuse(refusal)
        await self.close(code)
        return False

    async def _tracks(self) -> None:
        """Run the text track and the audio track until the cast is done or the client is gone."""
        text_in = asyncio.ensure_future(self._read())
        audio_out = asyncio.ensure_future(self._follow())
        try:
            done, _ = await asyncio.wait({text_in, audio_out}, return_when=asyncio.FIRST_COMPLETED)
            if audio_out in done:
                audio_out.result()  # SlowClient surfaces here
                await self.close(CLOSE_DONE)
                return
            await text_in  # the client went away (cancelled, unless kept) or idled out (the text ends)
            if not self.gone:
                await self.end_text()
        finally:
            for task in (text_in, audio_out):
                task.cancel()
            await asyncio.gather(text_in, audio_out, return_exceptions=True)

    # ---- the text track: text in ---------------------------------------------------------------

    async def _receive(self, deadline: float | None) -> forms.LiveMessage | Invalid | None:
        """The next message (Invalid: JSON that is not one); None once the client is gone (or idle
        past ``deadline``, a loop time: frames that are no message, pings included, do not move it)."""
        while True:
            try:
                data = await self.transport.receive(deadline)
            except asyncio.TimeoutError:
                idle_s = self.app[INTAKE].cfg.live_idle_s
                await self.error("idle", f"no message for {idle_s:g} s (INTAKE_LIVE_IDLE_S); closing")
                await self.end_text()  # before the close, so a client told "idle" finds the text closed
                await self.close(CLOSE_IDLE, {"error": "idle", "id": self.cast.cast_id, "seq_num": self.seq_num})
                return None
            if data is None:
                self.gone = True  # the client left (a disconnect cancels the cast unless it asked to keep it)
                return None
            if not isinstance(data, str):
                await self.error("expected_json", "send JSON text messages")
                continue
            msg = decode_message(data)
            if isinstance(msg, Invalid) and msg.code == "malformed_json":
                await self.error(msg.code, msg.message)
                continue
            return msg

    async def _read(self) -> None:
        idle_s = self.app[INTAKE].cfg.live_idle_s
        until = deadline(idle_s)  # moved by real messages only: junk and pings keep no session
        while (msg := await self._receive(until if self.cast.text_open else None)) is not None:
            if isinstance(msg, forms.TextMessage):
                until = deadline(idle_s)
                await self._text(msg.text, flush=msg.flush)
            elif isinstance(msg, forms.FlushMessage):
                until = deadline(idle_s)
                await self._text("", flush=True)
            elif isinstance(msg, forms.CloseMessage):
                await self.end_text()
            elif isinstance(msg, forms.CancelMessage):
                self.cancelled = self.transport.cancel()  # then the session closes with "cancelled": true
                await self.cast.cancel()  # barge-in: the text not yet spoken is dropped
                if self.cancelled:
                    return
            elif isinstance(msg, Invalid):
                await self.error(msg.code, msg.message)
            else:
                await self.error("unknown_type", "type is one of text, flush, close, cancel (start comes once)")

    async def _text(self, text: str, *, flush: bool) -> None:
        if not self.cast.text_open:
            await self.error("cast_closed", "the text is closed; open a new session for more")
            return
        try:
            await self.cast.say(text, flush=flush)
        except Refusal as refusal:
            await self.refuse(refusal)

    async def end_text(self) -> None:
        await self.cast.close()

    # ---- the audio track: audio out ------------------------------------------------------------

    async def _follow(self) -> None:
        sent: set[int] = set()
        send = self.transport.send_event
        async with self.app[INTAKE].tail.listen(self.cast.cast_id, self.seq_num, LISTENER_KIND) as listener:
            while not listener.done:
                item = await listener.next(None)
                if item is None:
                    return  # intake is stopping: the session closes
                entry, record = item.entry, item.entry.record
                if isinstance(record, Audio) and record.i not in sent:
                    await send({"type": "sentence", "index": record.i, "text": record.t})
                    await self.transport.send_audio(await convert_chunk(self.convert, record.body))
                    await send({"type": "sentence_done", "index": record.i, "duration_ms": record.d})
                    sent.add(record.i)
                elif isinstance(record, Eos):
                    self.cast.ended = True
                    done = {"type": "done", "sentences": record.sentences, "audio_ms": record.audio_ms}
                    await send({**done, "cancelled": True} if record.cancelled else done)
                elif isinstance(record, Error):
                    self.cast.ended = True
                    await self.error("synthesis_failed", record.reason)
                self.seq_num = entry.seq_num + 1


async def live_socket(request: web.Request) -> web.StreamResponse:
    busy = {"type": "error", "error": "busy", "message": "too many live sessions; retry soon"}
    return await serve(request, lambda socket: Session(request.app, request_client(request), socket), busy, CLOSE_BUSY)


async def close_sessions(app: web.Application) -> None:
    """A stop: every session's text ends (its cast finishes) and its socket closes, at once."""
    if INTAKE not in app:  # Redis never answered: no session opened
        return
    sessions = list(app[INTAKE].live_sessions)
    for session in sessions:
        session.keep = True  # a stop is no client leaving: its cast goes on
        await session.end_text()
    await asyncio.gather(*(s.close(CLOSE_GOING_AWAY) for s in sessions), return_exceptions=True)

