"""A Wyoming server (Home Assistant's protocol, the ``wyoming`` package) on INTAKE_WYOMING_PORT.

``describe`` is answered with ``info``: every installed voice with its language as BCP-47
(``en-US`` for ``a*``, ``en-GB`` for ``b*``, ``ja``, ``zh``, ...), the model's attribution, and
``supports_synthesize_streaming``. Each request is a live cast, so it has a link and replays like
any other: a one-shot ``synthesize`` is its whole text; a streaming request (``synthesize-start``,
``synthesize-chunk`` as the LLM writes, ``synthesize-stop``) feeds the cast as it comes, and the
back-compatible ``synthesize`` that clients send inside it is ignored. Audio goes out per
sentence (``audio-start``, ``audio-chunk``, ``audio-stop``), s16le mono at the model's rate;
``synthesize-stopped`` ends a streaming request. A client that leaves mid-cast cancels it.

The port is not the ``wyoming`` package's server: its read loop trusts the lengths a client
declares. Here every event is read with its lengths bounded first (``wyomingframes.py``), a
connection that sends no request for INTAKE_WYOMING_IDLE_S is closed (junk does not count), the
connections are capped overall and per client, and with API keys set a client is let in by its
address or by a key in its first event (``wyomingaccess.py``). A broken limit is answered with an
``error`` event (its ``code`` says which) and the connection is closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing, suppress
from functools import partial

from aiohttp import web
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error as WyomingError
from wyoming.event import Event, async_write_event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped, SynthesizeVoice

from castlog import SAMPLE_RATE, describe_voice
from servicekit import address_in, client_address

from .. import live
from ..authfail import key_matches
from ..cancel import cancel_cast
from ..context import INTAKE
from ..validate import Refusal
from . import pcm
from .follow import CastFailed, TailClosed, cast_audio
from .wyomingaccess import KEY_FIELD, Connections
from .wyomingframes import BadFrame, FrameLimits, read_event

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


def pick_voice(wanted: SynthesizeVoice | None, names: tuple[str, ...], default: str) -> str:
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


class Handler:
    """One Wyoming connection: requests one after another, each a live cast."""

    def __init__(self, app: web.Application, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 address: str | None, client: str) -> None:
        self.app, self.reader, self.writer = app, reader, writer
        self.address, self.client = address, client  # the peer's own address; its client key (an IPv6 /64)
        self.cast_id = ""
        self.voice = ""
        self.offset = 0
        self.streaming = False
        self.follower: asyncio.Task[None] | None = None

    async def write_event(self, event: Event) -> None:
        """Out within INTAKE_WYOMING_WRITE_TIMEOUT_S, or the connection is cut (ConnectionError)."""
        try:
            await asyncio.wait_for(async_write_event(event, self.writer), self.app[INTAKE].cfg.wyoming_write_timeout_s)
        except asyncio.TimeoutError:
            self.writer.transport.abort()  # its reads end too: the serve loop sees the end
            raise ConnectionError("the Wyoming client took no bytes in time") from None

    async def serve(self) -> None:
        """Events until the client leaves or breaks a limit (then an ``error`` event, and the cut)."""
        cfg = self.app[INTAKE].cfg
        limits = FrameLimits(cfg.wyoming_max_header_bytes, cfg.wyoming_max_data_bytes, cfg.wyoming_max_payload_bytes)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + cfg.wyoming_idle_s
        first = True
        try:
            while True:
                try:  # the whole event by the deadline: a frame trickled in does not reset it
                    event = await asyncio.wait_for(read_event(self.reader, limits), deadline - loop.time())
                except asyncio.TimeoutError:
                    raise BadFrame("idle", f"no request in {cfg.wyoming_idle_s:g} s (INTAKE_WYOMING_IDLE_S)") from None
                if event is None:
                    break
                if first:
                    await self._admit(event)
                    first = False
                if await self.handle_event(event):  # only a real request moves the deadline
                    deadline = loop.time() + cfg.wyoming_idle_s
        except (BadFrame, Refusal) as cut:
            await farewell(self.writer, cut.code, cut.message)
        except (ConnectionError, OSError):
            pass  # the client went away mid-write
        finally:
            try:
                await self.disconnect()
            finally:  # a stop cancels this task: the socket is closed all the same
                self.writer.close()

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
        """Whether ``event`` was a real request (junk and unknown events are ignored, and say False)."""
        try:
            return await self._handle(event)
        except Refusal as refusal:
            await self.write_event(WyomingError(text=refusal.message, code=refusal.code).event())
            return True

    async def _handle(self, event: Event) -> bool:
        check_fields(event)
        if Describe.is_type(event.type):
            voices = await self.app[INTAKE].voices.required(None)
            await self.write_event(voice_info(voices.names).event())
        elif SynthesizeStart.is_type(event.type):
            if self.streaming:  # a second start would leave the first cast open and its follower unowned
                raise Refusal(409, "request_open", "a streaming request is open; send synthesize-stop first")
            await self._open(SynthesizeStart.from_event(event).voice)
            self.streaming = True
        elif SynthesizeChunk.is_type(event.type) and self.streaming:
            await self._text(SynthesizeChunk.from_event(event).text)
        elif SynthesizeStop.is_type(event.type) and self.streaming:
            await self._end()
            await self.write_event(SynthesizeStopped().event())
        elif Synthesize.is_type(event.type) and not self.streaming:  # inside a stream: its copy, ignored
            synthesize = Synthesize.from_event(event)
            await self._open(synthesize.voice)
            await self._text(synthesize.text)
            await self._end()
        else:
            return False
        return True

    async def _open(self, wanted: SynthesizeVoice | None) -> None:
        voices = await self.app[INTAKE].voices.required(None)
        opened = await live.open_cast(self.app, self.client, pick_voice(wanted, voices.names, voices.default),
                                      "Wyoming", 1.0)
        self.cast_id, self.voice, self.offset = opened.cast_id, opened.voice, 0
        self.follower = asyncio.ensure_future(self._follow(self.cast_id))

    async def _text(self, text: str) -> None:
        if text:
            _, self.offset = await live.add_text(self.app, self.cast_id, self.offset, text, False, client=self.client)

    async def _end(self) -> None:
        """The text is complete: the rest is spoken; back when the last audio is out."""
        self.streaming = False
        await live.close_text(self.app, self.cast_id, self.voice)
        follower, self.follower = self.follower, None
        if follower is not None:
            await follower
        self.cast_id = ""

    async def _follow(self, cast_id: str) -> None:
        """Each sentence as audio-start, audio-chunk, audio-stop, as it is appended (through
        intake's shared tail: no blocked read of its own per connection)."""
        intake = self.app[INTAKE]
        try:
            async with aclosing(cast_audio(intake.tail, intake.reader, cast_id, -1, LISTENER_KIND)) as records:
                async for record in records:
                    data = await pcm.decode(record.body)
                    await self.write_event(AudioStart(rate=SAMPLE_RATE, width=SAMPLE_WIDTH, channels=CHANNELS).event())
                    await self.write_event(
                        AudioChunk(rate=SAMPLE_RATE, width=SAMPLE_WIDTH, channels=CHANNELS, audio=data).event()
                    )
                    await self.write_event(AudioStop().event())
        except CastFailed as failed:
            await self.write_event(WyomingError(text=failed.reason, code="synthesis_failed").event())
        except TailClosed:
            await self.write_event(WyomingError(text="intake is stopping", code="shutting_down").event())
        except (ConnectionError, OSError):
            pass  # the client went away or took nothing in time: the serve loop ends with it

    async def disconnect(self) -> None:
        """The client left: a cast still being spoken is cut short."""
        if self.follower is not None:
            self.follower.cancel()
            if self.cast_id:
                await asyncio.shield(cancel_cast(self.app, self.cast_id))


def check_fields(event: Event) -> None:
    """The fields the wyoming classes read without a check (``text``, ``voice``'s ``name`` and
    ``language``), checked first: a hostile value is an ``error`` event (400 ``bad_request``), not
    an exception in the connection, and opens no cast."""
    data = event.data
    if (Synthesize.is_type(event.type) or SynthesizeChunk.is_type(event.type)) and not isinstance(data.get("text"), str):
        raise Refusal(400, "bad_request", "the event's data needs `text`, a string")
    voice = data.get("voice")
    if isinstance(voice, dict) and not all(isinstance(voice.get(f), (str, type(None))) for f in ("name", "language")):
        raise Refusal(400, "bad_request", "`voice`'s `name` and `language` are strings")


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
    refused = connections.enter(client)
    if refused is not None:
        await farewell(writer, "busy", refused)
        await hang_up(reader, writer)
        return
    task = asyncio.current_task()
    assert task is not None
    connections.tasks.add(task)
    try:
        await Handler(app, reader, writer, address, client).serve()
    finally:
        connections.tasks.discard(task)
        connections.leave(client)


async def wyoming_ctx(app: web.Application) -> AsyncIterator[None]:
    """intake's Wyoming server, from start-up to clean-up (INTAKE_WYOMING_PORT; 0: none)."""
    cfg = app[INTAKE].cfg
    host = cfg.wyoming_host or cfg.host
    connections = Connections(cfg.wyoming_max_connections, cfg.wyoming_connections_per_client)
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
    await connections.close_all()
    await server.wait_closed()
