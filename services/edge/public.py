"""Edge's JSON bodies, encoded with one encoder built once. A record's public form travels as a
``fanout.Item`` (encoded once per record however many listeners get it)."""

from __future__ import annotations

from typing import Any

import msgspec

_encoder = msgspec.json.Encoder()


def encode_json(value: Any) -> bytes:
    return _encoder.encode(value)
