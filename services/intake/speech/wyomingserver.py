"""A Wyoming server (Home Assistant's protocol, the ``wyoming`` package) on INTAKE_WYOMING_PORT.

``describe`` is answered with ``info``: every installed voice with its language as BCP-47
(``en-US`` for ``a*``, ``en-GB`` for ``b*``, ``ja``, ``zh``, ...), the model's attribution, and
``supports_synthesize_streaming``. Each request is a live cast, so it has a link and replays like
any other: a one-shot ``synthesize`` is its whole text; a streaming request (``synthesize-start``,
``synthesize-chunk`` as the LLM writes, ``synthesize-stop``) feeds the cast as it comes, and the
back-compatible ``synthesize`` that clients send inside it is ignored. Audio is s16le mono at the
model's rate. A one-shot is answered as the spec says, with one ``audio-start``, an ``audio-chunk``
per sentence as it is made, and one ``audio-stop`` (a client that stops reading at the first
``audio-stop``, as Home Assistant's did before streaming, has the whole answer); a streaming
request gets one ``audio-start`` .. ``audio-stop`` group per sentence, then ``synthesize-stopped``.
Requests are answered in order while the next ones are read, so a client that leaves at any
point (mid-request, after ``synthesize-stop``, during a one-shot's answer) is seen at once and
cuts short every answer not yet spoken; a refused text ends its request the same way.

The port is not the ``wyoming`` package's server: its read loop trusts the lengths a client
declares. Here every event is read with its lengths bounded first (``wyomingframes.py``), a
connection that sends no request to speak for INTAKE_WYOMING_IDLE_S (an answer going out
suspends it) is closed (``describe``, junk and a frame trickled in do not count), the
connections are capped overall and per client (one that has sent nothing yet waits, holding no seat), and with API keys set a client is let in by its
address or by a key in its first event (``wyomingaccess.py``). A broken limit is answered with an
``error`` event (its ``code`` says which) and the connection is closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from functools import partial

from aiohttp import web
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error as WyomingError
from wyoming.event import Event, async_write_event
from wyoming.info import Attribution, Info, TtsProgram, TtsVoice
from wyoming.tts import SynthesizeStopped

from castlog import SAMPLE_RATE, describe_voice
from fanout import stop_tasks
from servicekit import address_in, client_address
from servicekit.keys import key_matches

from ..context import INTAKE
from ..validate import Refusal
from .follow import CastFailed, TailClosed, cast_audio
from .formats import PcmConverter
from .session import InOrder, OpenCast, deadline, left
from .stream import convert_chunk
from .wyomingaccess import KEY_FIELD, Connections, Seat
from .wyomingframes import (
    BadFrame,
    Describe,
    FrameLimits,
    Request,
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    Voice,
    read_event,
    request_of,
)

log = logging.getLogger(__name__)

ATTRIBUTION = Attribution(name="hexgrad", url="https://huggingface.co/hexgrad/Kokoro-82M")
VERSION = "1.0"
SAMPLE_WIDTH, CHANNELS = 2, 1
LISTENER_KIND = "wyoming"  # streamtts_intake_listeners{kind}
# How long the last word to a client that broke a limit may take to go out before the cut.
FAREWELL_S = 2.0
# What a refused client may have sent that is read and dropped before the socket closes (a close
# with unread input sends a reset, which can destroy the refusal on its way to the client).
LINGER_BYTES = 64 * 1024
# Requests of one connection whose answers are still going out (past it: 429 too_many_requests).
MAX_ANSWERS = 4


def voice_info(names: tuple[str, ...]) -> Info:
    voices = [
        TtsVoice(name=name, attribution=ATTRIBUTION, installed=True, version=VERSION,
                 description=f"{describe_voice(name).name} ({describe_voice(name).language})",
                 languages=[describe_voice(name).lang or "en-US"])
        for name in names
    ]
    program = TtsProgram(name="streamtts", attribution=ATTRIBUTION, installed=True, version=VERSION,
                         description="StreamTTS: Kokoro-82M, streamed as it is made", voices=voices,
                         supports_synthesize_streaming=True)
    return Info(tts=[program])


def pick_voice(wanted: Voice | None, names: tuple[str, ...], default: str) -> str:
    """The voice asked for by name, else the first of the language asked for, else the default."""
    if wanted is None:
        return default
    if wanted.name in names:
        return str(wanted.name)
    if wanted.language:
        lang = wanted.language.lower()
        same = [n for n in names if describe_voice(n).lang.lower() in (lang, lang.split("-")[0])]
        if same:
            return default if default in same else same[0]
    return default


@dataclass(eq=False)
class Answer:
    """One request's cast and the audio that answers it (requests are answered in order)."""

    cast: OpenCast
    streaming: bool  # one group per sentence and synthesize-stopped; else one group for the whole text
    stopped: asyncio.Event = field(default_factory=asyncio.Event)  # its text is complete


class Handler:
    """One Wyoming connection: requests one after another, each a live cast, read on while the
    answers go out (so a client that leaves mid-answer is seen, and its casts are cut short)."""

    def __init__(self, app: web.Application, connections: Connections, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, address: str | None, client: str) -> None:
        self.app, self.connections, self.reader, self.writer = app, connections, reader, writer
        self.address, self.client = address, client  # the peer's own address; its client key (an IPv6 /64)
        self.answers = InOrder(MAX_ANSWERS)  # not yet all out
        self.open: Answer | None = None  # the streaming request taking text
        self.deadline = 0.0  # the loop time the connection is idle at (answers going out suspend it)

    async def write_event(self, event: Event) -> None:
        """Out within INTAKE_WYOMING_WRITE_TIMEOUT_S, or the connection is cut (ConnectionError)."""
        try:
            await asyncio.wait_for(async_write_event(event, self.writer), self.app[INTAKE].cfg.wyoming_write_timeout_s)
        except asyncio.TimeoutError:
            self.writer.transport.abort()  # its reads end too: the serve loop sees the end
            raise ConnectionError("the Wyoming client took no bytes in time") from None

    async def serve(self, seat: Seat) -> None:
        """Events until the client leaves or breaks a limit (then an ``error`` event, and the cut).
        The first event lets the client in and takes its seat."""
        cfg = self.app[INTAKE].cfg
        limits = FrameLimits(cfg.wyoming_max_header_bytes, cfg.wyoming_max_data_bytes, cfg.wyoming_max_payload_bytes)
        self._idle_from_now()
        try:
            while (event := await self._next(limits)) is not None:
                if seat.waiting.held:
                    await self._admit(event)
                    if (refused := self.connections.sit(seat)) is not None:
                        raise Refusal(503, "busy", refused)
                if await self.handle_event(event):  # only a request to speak moves the deadline
                    self._idle_from_now()
        except (BadFrame, Refusal) as cut:
            await farewell(self.writer, cut.code, cut.message)
        except (ConnectionError, OSError):
            pass  # the client went away mid-write
        finally:
            try:
                await self.disconnect()
            finally:  # a stop cancels this task: the socket is closed all the same
                self.writer.close()

    def _idle_from_now(self) -> None:
        self.deadline = deadline(self.app[INTAKE].cfg.wyoming_idle_s)

    async def _next(self, limits: FrameLimits) -> Event | None:
        """The next whole event by the deadline (a frame trickled in does not move it); while an
        answer goes out the client is listening, not idle."""
        read = asyncio.ensure_future(read_event(self.reader, limits))
        try:
            while not read.done():
                busy = self.answers.busy()
                wait_s = None if busy else left(self.deadline)
                if wait_s == 0:
                    idle_s = self.app[INTAKE].cfg.wyoming_idle_s
                    raise BadFrame("idle", f"no request in {idle_s:g} s (INTAKE_WYOMING_IDLE_S)")
                await asyncio.wait({read, *busy}, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
            return read.result()
        finally:
            read.cancel()

    async def _admit(self, event: Event) -> None:
        """With API keys set: the address is allowed, or the first event carries a key (401 otherwise)."""
        intake = self.app[INTAKE]
        keys = intake.cfg.api_keys
        given = event.data.pop(KEY_FIELD, None)  # never passed on with the request
        if not keys or address_in(self.address, intake.cfg.wyoming_allow_from):
            return
        intake.auth_failures.check(self.client)
        if key_matches(given, keys):
            return
        if given is not None:  # a key given and wrong: a guess
            await intake.auth_failures.failed(self.client, "api_key")
        raise Refusal(401, "invalid_api_key", f"send a key of STREAMTTS_API_KEYS as `{KEY_FIELD}` in the first "
                      "event's data (or connect from an address of INTAKE_WYOMING_ALLOW_FROM)")

    async def handle_event(self, event: Event) -> bool:
        """Whether ``event`` was a request to speak (describe, junk and other events say False)."""
        try:
            request = request_of(event)
            return False if request is None else await self._handle(request)
        except Refusal as refusal:  # a bad request, or one refused: answered, and the connection goes on
            await self.write_event(WyomingError(text=refusal.message, code=refusal.code).event())
            return True

    async def _handle(self, request: Request) -> bool:
        if isinstance(request, Describe):
            voices = await self.app[INTAKE].voices.required(None)
            await self.write_event(voice_info(voices.names).event())
            return False
        if isinstance(request, SynthesizeStart):
            if self.open is not None:  # a second start would leave the first cast open
                raise Refusal(409, "request_open", "a streaming request is open; send synthesize-stop first")
            self.open = await self._begin(request.voice, streaming=True)
        elif isinstance(request, SynthesizeChunk) and self.open is not None:
            await self._text(self.open, request.text)
        elif isinstance(request, SynthesizeStop) and self.open is not None:
            answer, self.open = self.open, None
            await self._end(answer)
        elif isinstance(request, Synthesize) and self.open is None:  # inside a stream: its copy, ignored
            answer = await self._begin(request.voice, streaming=False)
            await self._text(answer, request.text)
            await self._end(answer)
        else:
            return False
        return True

    async def _begin(self, wanted: Voice | None, *, streaming: bool) -> Answer:
        if self.answers.full():
            raise Refusal(429, "too_many_requests", f"{MAX_ANSWERS} answers are still going out on this "
                          "connection; wait for one to end")
        voices = await self.app[INTAKE].voices.required(None)
        cast, _ = await OpenCast.open(self.app, self.client, pick_voice(wanted, voices.names, voices.default),
                                      "Wyoming")
        answer = Answer(cast, streaming)
        self.answers.add(cast, lambda: self._follow(answer))
        return answer

    async def _text(self, answer: Answer, text: str) -> None:
        """A refused text ends its request: its cast is cut short, nothing of it stays open."""
        if not text or not answer.cast.text_open:
            return
        try:
            await answer.cast.say(text)
        except Refusal:
            await asyncio.shield(self._cut(answer))
            raise

    async def _end(self, answer: Answer) -> None:
        """The text is complete: the rest is spoken (the audio track answers the end)."""
        await answer.cast.close()
        answer.stopped.set()

    async def _follow(self, answer: Answer) -> None:
        """The answer's audio, once the one before it is out (through intake's shared tail: no
        blocked read of its own per connection): a one-shot's as one audio-start .. audio-stop,
        a streaming request's one group per sentence, then synthesize-stopped."""
        try:
            await self._speak(answer)
            await answer.stopped.wait()  # (a cast ends only once its text does: at once)
            await self.write_event(SynthesizeStopped().event() if answer.streaming else AudioStop().event())
        except TailClosed:
            await self.write_event(WyomingError(text="intake is stopping", code="shutting_down").event())
        except (ConnectionError, OSError):
            pass  # the client went away or took nothing in time: the serve loop ends with it
        finally:
            self._idle_from_now()  # the client heard its answer: idle from here

    async def _speak(self, answer: Answer) -> None:
        intake = self.app[INTAKE]
        audio = {"rate": SAMPLE_RATE, "width": SAMPLE_WIDTH, "channels": CHANNELS}
        if not answer.streaming:  # once its text is taken whole (a refused one gets an error, no audio)
            await answer.stopped.wait()
            await self.write_event(AudioStart(**audio).event())
        try:
            async with aclosing(cast_audio(intake.tail, intake.reader, answer.cast.cast_id, -1, LISTENER_KIND)) as records:
                async for record in records:
                    chunk = AudioChunk(**audio, audio=await convert_chunk(PcmConverter(), record.body)).event()
                    if answer.streaming:
                        await self.write_event(AudioStart(**audio).event())
                    await self.write_event(chunk)
                    if answer.streaming:
                        await self.write_event(AudioStop().event())
        except CastFailed as failed:
            await self.write_event(WyomingError(text=failed.reason, code="synthesis_failed").event())
        answer.cast.ended = True

    async def _cut(self, answer: Answer) -> None:
        """The request is over before its audio: its cast is cut short and its text closed."""
        if self.open is answer:
            self.open = None
        await answer.cast.close()  # (closed, the text holds no place among the client's open casts)
        await self.answers.cut(answer.cast)

    async def disconnect(self) -> None:
        """The client left (or was cut off, or intake stops): every answer not yet spoken is cut short."""
        if self.open is not None:
            await self.open.cast.close()
        await self.answers.cut()


async def farewell(writer: asyncio.StreamWriter, code: str, message: str) -> None:
    """The last word to a client that broke a limit: an ``error`` event, if it goes out in time."""
    with suppress(ConnectionError, OSError, asyncio.TimeoutError):
        await asyncio.wait_for(async_write_event(WyomingError(text=message, code=code).event(), writer), FAREWELL_S)


async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Close a refused socket without a reset: half-close, drop what the client had sent (at most
    LINGER_BYTES, within FAREWELL_S, until it closes too), then close."""
    with suppress(ConnectionError, OSError, asyncio.TimeoutError):
        if writer.can_write_eof():
            writer.write_eof()
        await asyncio.wait_for(_drop_input(reader), FAREWELL_S)
    writer.close()


async def _drop_input(reader: asyncio.StreamReader) -> None:
    left = LINGER_BYTES
    while left > 0 and (chunk := await reader.read(min(left, 4096))):
        left -= len(chunk)


async def _connection(app: web.Application, connections: Connections,
                      reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One accepted socket: counted (or refused ``busy`` and closed at once), then served."""
    peer = writer.get_extra_info("peername")
    address = str(peer[0]) if peer else None
    client = client_address(address, None, app[INTAKE].cfg.forwarded_allow_ips)
    seat = connections.enter(client)
    if isinstance(seat, str):
        await farewell(writer, "busy", seat)
        await hang_up(reader, writer)
        return
    task = asyncio.current_task()
    assert task is not None
    connections.tasks.add(task)
    try:
        await Handler(app, connections, reader, writer, address, client).serve(seat)
    except asyncio.CancelledError:
        pass  # a stop ended it (asyncio's server would log a cancelled connection as an error)
    finally:
        connections.tasks.discard(task)
        seat.leave()


async def wyoming_ctx(app: web.Application) -> AsyncIterator[None]:
    """intake's Wyoming server, from start-up to clean-up (INTAKE_WYOMING_PORT; 0: none)."""
    cfg = app[INTAKE].cfg
    host = cfg.wyoming_host or cfg.host
    connections = Connections(cfg.wyoming_max_connections, cfg.wyoming_connections_per_client,
                              app[INTAKE].session_waiting)
    try:  # the stream's limit bounds a header line (wyomingframes.py)
        server = await asyncio.start_server(partial(_connection, app, connections), host, cfg.wyoming_port,
                                            limit=cfg.wyoming_max_header_bytes)
    except OSError as exc:  # the HTTP API goes on without it
        log.error("no Wyoming server: cannot listen on %s:%d (%s)", host, cfg.wyoming_port, exc)
        yield
        return
    log.info("Wyoming server on %s:%d", host, cfg.wyoming_port)
    yield
    server.close()
    # every connection's task cancelled until it has ended (one that swallows a cancel mid-Redis-call
    # is cancelled again, not waited on for ever)
    await stop_tasks(*connections.tasks)
    await server.wait_closed()
