"""A Deepgram-compatible TTS WebSocket: ``GET /v1/speak?model=&encoding=&sample_rate=``.

What Pipecat's and LiveKit's Deepgram TTS services speak. Client messages: ``Speak {text}``,
``Flush``, ``Clear``, ``Close``; the server answers ``Metadata`` once, binary audio (raw
linear16, mulaw or alaw at ``sample_rate``), ``Flushed {sequence_id}`` once a flushed turn's audio
is all out, ``Cleared {sequence_id}``, and ``Warning {description, code}`` for a message it
cannot take. Each turn (the text up to a ``Flush``) is a live cast with its own link, spoken in
order; ``Clear`` cancels every turn not yet out (barge-in), and so does a client that leaves.
``Authorization: Token <key>`` (or Bearer) when STREAMTTS_API_KEYS is set (app.py checks it).
"""

from __future__ import annotations

import asyncio
import uuid
from contextlib import aclosing
from dataclasses import dataclass

import msgspec
from aiohttp import web

from castlog.slots import Seat
from servicekit import Hold

from ..context import INTAKE, request_client
from ..validate import Refusal
from .follow import CastFailed, TailClosed, cast_audio
from .formats import MAX_RATE, MIN_RATE, PHONE_ENCODINGS, converter
from .session import InOrder, OpenCast, SlowClient, Socket, deadline, serve
from .stream import convert_chunk
from .v1 import V1Refusal

ROUTE = "/v1/speak"
MODEL_VERSION = "kokoro-82m-v1.0"
LISTENER_KIND = "speak"  # streamtts_intake_listeners{kind}
# Turns spoken or waiting in one session; a client that flushes faster than they are spoken waits.
MAX_TURNS = 16
CLOSE_DONE, CLOSE_GOING_AWAY, CLOSE_BUSY = 1000, 1001, 4503
# Deepgram's Aura voices -> Kokoro's English voices: by accent and gender.
_AURA_BRITISH = {"athena": "bf_emma", "helios": "bm_george", "pandora": "bf_isabella", "draco": "bm_fable"}
_AURA_MALE = frozenset(
    "orion arcas perseus angus orpheus zeus apollo aries atlas hermes hyperion jupiter mars neptune odysseus "
    "pluto saturn".split()
)


# ---- the client's messages, as Deepgram documents them: one tagged union, one decoder ----------


class Speak(msgspec.Struct, frozen=True, tag="Speak", tag_field="type"):
    text: str


class Flush(msgspec.Struct, frozen=True, tag="Flush", tag_field="type"):
    """The turn's text ends: it is spoken, then ``Flushed``."""


class Clear(msgspec.Struct, frozen=True, tag="Clear", tag_field="type"):
    """Barge-in: every turn not yet out is cancelled, then ``Cleared``."""


class Close(msgspec.Struct, frozen=True, tag="Close", tag_field="type"):
    """The turns in hand are spoken, then the socket closes."""


Message = Speak | Flush | Clear | Close
_decode = msgspec.json.Decoder(Message).decode


def decode_message(data: str | bytes) -> Message | str:
    """The message, or the ``Warning``'s description saying what is wrong with it."""
    try:
        return _decode(data)
    except msgspec.ValidationError as exc:
        return f"{exc}: the type is one of Speak (with text, a string), Flush, Clear, Close"
    except (msgspec.DecodeError, RecursionError):
        return 'each message is one JSON object with a "type"'


def voice_of(model: str | None, installed: tuple[str, ...], default: str) -> str:
    """A voice id as installed, or an Aura model name (``aura-2-thalia-en``) mapped to one."""
    if not model:
        return default
    if model in installed:
        return model
    parts = model.lower().split("-")
    if parts[0] != "aura":
        raise V1Refusal(422, "unknown_voice", f"no such model {model!r}: a voice id or an Aura name", "model")
    name = next((p for p in parts[1:] if not p.isdigit()), "")
    for candidate in (_AURA_BRITISH.get(name), "am_michael" if name in _AURA_MALE else "af_heart", default):
        if candidate in installed:
            return candidate
    return default


@dataclass
class Turn:
    """The text up to a Flush: one live cast (none for a Flush with nothing before it)."""

    cast: OpenCast | None = None
    sequence_id: int | None = None  # set by its Flush


class SpeakSession:
    def __init__(self, request: web.Request, socket: Socket, model: str, voice: str, encoding: str, rate: int) -> None:
        self.app, self.socket, self.model = request.app, socket, model
        self.voice, self.encoding, self.rate = voice, encoding, rate
        self.client = request_client(request)
        self.turns = InOrder(MAX_TURNS)  # turns whose audio is not all out
        self.current: Turn | None = None  # the turn taking text
        self.sequence = 0
        self.keep = False  # a stop sets it: the casts go on
        self.waiting = Hold(self.app[INTAKE].session_waiting, self.client)  # until its first message
        self.seat: Seat | None = None  # the client's session seat, from its first message

    async def warn(self, code: str, description: str) -> None:
        await self.socket.send_event({"type": "Warning", "description": description, "code": code})

    async def run(self) -> None:
        self.app[INTAKE].live_sessions.add(self)  # counted from the upgrade, before its first message
        await self.socket.send_event({"type": "Metadata", "request_id": str(uuid.uuid4()),
                                      "model_name": self.model or self.voice, "model_version": MODEL_VERSION,
                                      "model_uuid": self.voice})
        gone = True
        try:
            gone = await self._read()
            if not gone:  # Close: the turns in hand are spoken while the socket is watched, then it closes
                gone = await self._hung_up_first()
                if not gone:
                    await self.close(CLOSE_DONE)
        except (ConnectionError, SlowClient):
            gone = True
        except asyncio.CancelledError:
            gone = True  # the client dropped the connection (aiohttp cancels its handler)
            raise
        finally:  # the turns not out stop; their casts are cut short, unless a stop keeps them
            await asyncio.shield(self.turns.cut(cancel=gone and not self.keep))

    async def _read(self) -> bool:
        """Take the client's messages until Close (False) or the client is gone (True). The first
        takes the client's session seat; the idle limit runs from the last message (pongs and
        junk do not move it)."""
        idle = self.app[INTAKE].cfg.live_idle_s
        until = deadline(idle)
        while True:
            try:
                data = await self.socket.receive(until)
            except asyncio.TimeoutError:
                await self.warn("IDLE", f"no message for {idle:g} s (INTAKE_LIVE_IDLE_S); closing")
                await self.end_text()
                return False
            if data is None:
                return True
            body = decode_message(data) if isinstance(data, str) else "send JSON text messages"
            if isinstance(body, str):
                await self.warn("INVALID_MESSAGE", body)
                continue
            until = deadline(idle)
            if not await self._seated():
                return False
            if isinstance(body, Close):
                await self.end_text()
                return False
            await self._message(body)

    async def _seated(self) -> bool:
        """The client's session seat from its first message on (INTAKE_LIVE_SESSIONS_PER_CLIENT,
        shared with its live sessions); False, once told, when it holds them all."""
        if not self.waiting.held:
            return True
        self.waiting.give()
        self.seat, _ = await self.app[INTAKE].session_seats.acquire(self.client)
        if self.seat is None:
            cap = self.app[INTAKE].session_seats.cap
            description = f"your address has {cap} sessions open (INTAKE_LIVE_SESSIONS_PER_CLIENT); end one first"
            await self.socket.send_event({"type": "Error", "err_code": "TOO_MANY_SESSIONS", "description": description})
            await self.close(CLOSE_BUSY)
            return False
        return True

    async def _hung_up_first(self) -> bool:
        """Whether the client hung up (what it says after Close is dropped) before the turns in
        hand were all out (an error of a turn's is raised)."""
        spoken = asyncio.ensure_future(self.turns.done())
        watch = asyncio.ensure_future(self._hang_up())
        try:
            await asyncio.wait({spoken, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not spoken.done():
                spoken.cancel()  # (the turns themselves stop with the session)
        if spoken.done() and not spoken.cancelled():
            spoken.result()
            return False
        return True

    async def _hang_up(self) -> None:
        while await self.socket.receive(None) is not None:
            pass

    async def _message(self, body: Speak | Flush | Clear) -> None:
        if isinstance(body, Speak):
            if body.text:
                await self._speak(body.text)
        elif isinstance(body, Flush):
            await self._flush()
        else:  # Clear (barge-in): every turn not yet out stops now and its cast is cut short
            self.current = None
            await self.turns.cut()
            await self.socket.send_event({"type": "Cleared", "sequence_id": self.sequence})

    async def _speak(self, text: str) -> None:
        try:
            if self.current is None:
                await self.turns.room()
                cast, _ = await OpenCast.open(self.app, self.client, self.voice, None)
                self.current = turn = Turn(cast)
                self.turns.add(cast, lambda: self._answer(turn))
            assert self.current.cast is not None  # (a turn taking text has its cast)
            await self.current.cast.say(text)
        except Refusal as refusal:
            await self.warn(refusal.code.upper(), refusal.message)

    async def _flush(self) -> None:
        """Flush: the turn's text ends; its audio follows, then Flushed with its sequence id (at
        once, in its place in the order, when nothing was spoken since the last Flush)."""
        turn = self.current or Turn()
        if self.current is None:
            await self.turns.room()
            self.turns.add(None, lambda: self._answer(turn))
        await self.end_text()
        turn.sequence_id = self.sequence
        self.sequence += 1

    async def end_text(self) -> None:
        """The turn taking text ends (Flush, Close, the idle limit, a stop): it is spoken whole."""
        turn, self.current = self.current, None
        if turn is not None and turn.cast is not None:
            await turn.cast.close()

    async def _answer(self, turn: Turn) -> None:
        """The turn's audio, then Flushed with its sequence id (at once, in its place in the
        order, when nothing was spoken since the last Flush)."""
        if turn.cast is not None:
            await self._send_turn(turn.cast)
        if turn.sequence_id is not None:
            await self.socket.send_event({"type": "Flushed", "sequence_id": turn.sequence_id})

    async def _send_turn(self, cast: OpenCast) -> None:
        audio = converter(self.encoding, rate=self.rate)
        intake = self.app[INTAKE]
        try:
            async with aclosing(cast_audio(intake.tail, intake.reader, cast.cast_id, -1, LISTENER_KIND)) as records:
                async for record in records:
                    data = await convert_chunk(audio, record.body)
                    if data:
                        await self.socket.send_audio(data)
        except (CastFailed, TailClosed) as ended:
            await self.warn(ended.code.upper(), ended.message)
        cast.ended = True
        rest = audio.close()
        if rest:
            await self.socket.send_audio(rest)

    async def close(self, code: int) -> None:
        await self.socket.close(code)


def _query(request: web.Request) -> tuple[str, str, int]:
    """(model, encoding, sample_rate) from the query, or a 400/422 before the upgrade."""
    q = request.query
    encoding = q.get("encoding", "linear16")
    if encoding not in PHONE_ENCODINGS:
        raise V1Refusal(422, "invalid_field", f"encoding must be one of {', '.join(PHONE_ENCODINGS)}", "encoding")
    try:
        rate = int(q.get("sample_rate", "24000"))
    except ValueError:
        rate = 0
    if not MIN_RATE <= rate <= MAX_RATE:
        raise V1Refusal(422, "invalid_field", f"sample_rate must be from {MIN_RATE} to {MAX_RATE}", "sample_rate")
    return q.get("model", ""), encoding, rate


async def speak_socket(request: web.Request) -> web.StreamResponse:
    model, encoding, rate = _query(request)
    voices = await request.app[INTAKE].voices.required(None)  # 503 warming_up before any worker published
    voice = voice_of(model, voices.names, voices.default)
    busy = {"type": "Error", "description": "too many sessions; retry soon", "err_code": "BUSY"}
    return await serve(request, lambda socket: SpeakSession(request, socket, model, voice, encoding, rate), busy,
                       CLOSE_GOING_AWAY)
