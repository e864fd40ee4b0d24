"""The public JSON form of a record, encoded once per record however many listeners get it.

``{"seq_num": n, "kind": "audio", "ts": ms, "headers": {...}, "body": base64 | null}``: the
headers are the record's own fields without the tag ``e`` and without the body.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from castlog import Audio, Entry

_encoder = msgspec.json.Encoder()


def public_dict(entry: Entry) -> dict[str, Any]:
    headers = msgspec.structs.asdict(entry.record)  # fields only: no tag
    headers.pop("body", None)
    for f in msgspec.structs.fields(entry.record):  # as stored: a field at its default is left out
        if f.default is not msgspec.NODEFAULT and headers.get(f.name, f.default) == f.default:
            headers.pop(f.name, None)
    body = entry.record.body if isinstance(entry.record, Audio) else None
    return {
        "seq_num": entry.seq_num,
        "kind": entry.kind,
        "ts": entry.ts,
        "headers": headers,
        "body": base64.b64encode(body).decode("ascii") if body is not None else None,
    }


def encode_json(value: Any) -> bytes:
    return _encoder.encode(value)


class Item:
    """One record on its way to listeners; the tail hands the same Item to every listener, so
    its JSON and its SSE frame are built once, by whichever listener writes it first."""

    __slots__ = ("entry", "live", "_json", "_sse")

    def __init__(self, entry: Entry, *, live: bool = False) -> None:
        self.entry = entry
        self.live = live  # came from the shared tail (not an offset read): counts for latency
        self._json: bytes | None = None
        self._sse: bytes | None = None

    @property
    def seq(self) -> int:
        return self.entry.seq_num

    def json(self) -> bytes:
        if self._json is None:
            self._json = encode_json(public_dict(self.entry))
        return self._json

    def sse(self) -> bytes:
        """``id:`` the seq_num, ``event:`` the kind, ``data:`` the public JSON (one line)."""
        if self._sse is None:
            head = b"id: %d\nevent: %s\ndata: " % (self.seq, self.entry.kind.encode())
            self._sse = head + self.json() + b"\n\n"
        return self._sse
