"""The live session's client messages (the WebSocket's and WebRTC's control channel's alike):
one tagged union (``servicekit.forms.LiveMessage``), one decoder; what is not a message is one
``error`` event saying what is wrong."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from servicekit.forms import LiveMessage

_decode = msgspec.json.Decoder(LiveMessage).decode


@dataclass(frozen=True)
class Invalid:
    """A message that is not one of ``LiveMessage``: the ``error`` event that answers it."""

    code: str
    message: str


def decode_message(data: str) -> LiveMessage | Invalid:
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
