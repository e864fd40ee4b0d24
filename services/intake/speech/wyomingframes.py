"""Wyoming events read with every length bounded before it is read.

A Wyoming event is a JSON header line (``type``, optional ``data``, ``data_length``,
``payload_length``), then ``data_length`` bytes of JSON data, then ``payload_length`` bytes of
payload. The ``wyoming`` package's read loop trusts both lengths (``readexactly`` of whatever a
client declares) and reads a line as long as its stream's buffer allows; here the header is
bounded by the stream's limit (``asyncio.start_server(limit=...)``), each declared length is
checked before a byte of it is read, and the whole event must arrive by a deadline, so a frame
trickled in a byte at a time holds the connection no longer than an idle one.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import msgspec
from wyoming.event import Event

from ..validate import Refusal


@dataclass(frozen=True)
class FrameLimits:
    header_bytes: int  # the header line, newline included (the stream's limit)
    data_bytes: int
    payload_bytes: int


class BadFrame(Exception):
    """A frame that breaks a limit or the format: the connection is answered ``code`` and cut."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _length(header: dict[str, Any], name: str, most: int) -> int:
    value = header.get(name)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadFrame("bad_frame", f"{name} must be a non-negative integer")
    if value > most:
        raise BadFrame("frame_too_large", f"{name} {value} is over {most} bytes")
    return value


def _object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # UnicodeDecodeError, JSONDecodeError; nesting past the parser's depth
        raise BadFrame("bad_frame", f"the {what} is not JSON") from None
    if not isinstance(value, dict):
        raise BadFrame("bad_frame", f"the {what} is not a JSON object")
    return value


async def read_event(reader: asyncio.StreamReader, limits: FrameLimits) -> Event | None:
    """The next event (None when the client closed between events); ``BadFrame`` otherwise.
    The caller bounds the time (``asyncio.wait_for``)."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise BadFrame("bad_frame", "the connection closed inside a header") from None
    except asyncio.LimitOverrunError:
        raise BadFrame("frame_too_large", f"a header line is over {limits.header_bytes} bytes") from None
    header = _object(line, "header")
    kind = header.get("type")
    if not isinstance(kind, str) or not kind:
        raise BadFrame("bad_frame", "an event needs a type")
    data_length = _length(header, "data_length", limits.data_bytes)
    payload_length = _length(header, "payload_length", limits.payload_bytes)
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise BadFrame("bad_frame", "an event's data is a JSON object")
    try:
        if data_length:
            data.update(_object(await reader.readexactly(data_length), "data"))
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        raise BadFrame("bad_frame", "the connection closed inside an event") from None
    return Event(type=kind, data=data, payload=payload)


# ---- the requests a TTS client sends: one tagged union, one decoder ---------------------------


class Voice(msgspec.Struct, frozen=True):
    name: str | None = None
    language: str | None = None
    speaker: str | None = None


class Describe(msgspec.Struct, frozen=True, tag="describe", tag_field="type"):
    pass


class Synthesize(msgspec.Struct, frozen=True, tag="synthesize", tag_field="type"):
    text: str
    voice: Voice | None = None


class SynthesizeStart(msgspec.Struct, frozen=True, tag="synthesize-start", tag_field="type"):
    voice: Voice | None = None


class SynthesizeChunk(msgspec.Struct, frozen=True, tag="synthesize-chunk", tag_field="type"):
    text: str


class SynthesizeStop(msgspec.Struct, frozen=True, tag="synthesize-stop", tag_field="type"):
    pass


Request = Describe | Synthesize | SynthesizeStart | SynthesizeChunk | SynthesizeStop
REQUEST_TYPES = frozenset(str(t.__struct_config__.tag) for t in (Describe, Synthesize, SynthesizeStart,
                                                                  SynthesizeChunk, SynthesizeStop))


def request_of(event: Event) -> Request | None:
    """The request ``event`` is, None for any other event (audio, junk: ignored, as the protocol
    wants); a ``bad_request`` refusal saying which field is wrong (answered; the connection goes on)."""
    if event.type not in REQUEST_TYPES:
        return None
    try:
        return msgspec.convert({**event.data, "type": event.type}, Request)  # type: ignore[arg-type]
    except msgspec.ValidationError as exc:
        raise Refusal(400, "bad_request", f"{event.type}: {exc}") from None
