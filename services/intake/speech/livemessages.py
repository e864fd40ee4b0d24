"""The live session's client messages (the WebSocket's and WebRTC's control channel's alike):
one tagged union, one decoder; what is not a message is one ``error`` event saying what is wrong."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec


class Start(msgspec.Struct, frozen=True, tag="start", tag_field="type"):
    voice: str | None = None
    title: str | None = None
    speed: float = 1.0
    format: str | None = None  # mp3 when not given
    keep: bool = False  # the cast goes on when the client disconnects (else it is cancelled)


class Text(msgspec.Struct, frozen=True, tag="text", tag_field="type"):
    text: str
    flush: bool = False


class Flush(msgspec.Struct, frozen=True, tag="flush", tag_field="type"):
    """Speak what the text holds now, however short."""


class Close(msgspec.Struct, frozen=True, tag="close", tag_field="type"):
    """The text is complete: the rest is spoken, then ``done``."""


class Cancel(msgspec.Struct, frozen=True, tag="cancel", tag_field="type"):
    """Barge-in: the text not yet spoken is dropped, the cast ends at the chunk in hand."""


Message = Start | Text | Flush | Close | Cancel
_decode = msgspec.json.Decoder(Message).decode


@dataclass(frozen=True)
class Invalid:
    """A message that is not one of ``Message``: the ``error`` event that answers it."""

    code: str
    message: str


def decode_message(data: str) -> Message | Invalid:
    try:
        return _decode(data)
    except msgspec.ValidationError as exc:  # JSON, but not a message: which part is wrong
        where = str(exc)
        if where.endswith("`$.type`") or where.endswith("field `type`"):
            return Invalid("unknown_type", "type is one of start (first, once), text, flush, close, cancel")
        if " - at `$." in where:
            return Invalid("invalid_field", f"{where}: see the message's fields in docs/design.md")
        return Invalid("malformed_json", 'each message is one JSON object with a "type"')
    except (msgspec.DecodeError, RecursionError):
        return Invalid("malformed_json", 'each message is one JSON object with a "type"')
