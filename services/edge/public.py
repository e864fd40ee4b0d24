"""A record's public JSON form (``castlog.public_dict``), encoded once per record however many
listeners get it."""

from __future__ import annotations

from typing import Any

import msgspec

from castlog import Entry, public_dict

_encoder = msgspec.json.Encoder()


def encode_json(value: Any) -> bytes:
    return _encoder.encode(value)


class Item:
    """One record on its way to listeners; the tail hands the same Item to every listener, so
    its JSON and its SSE frame are built once, by whichever listener writes it first."""

    __slots__ = ("entry", "from_tail", "_json", "_sse")

    def __init__(self, entry: Entry, *, from_tail: bool = False) -> None:
        self.entry = entry
        self.from_tail = from_tail  # came from the shared tail (not an offset read): counts for latency
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
