"""The records of a cast log, as a msgspec tagged union.

An entry of ``pub/casts/<id>`` has the fields ``e`` (the kind), ``h`` (the headers as a JSON
object), ``b`` (the body, audio only) and ``ts`` (milliseconds since the epoch, stamped by Redis
when the entry was appended). Tags are explicit strings so that renaming a class never changes
stored data; ``h`` carries the tag too, so one decoder reads every kind.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from .keys import Row, seq_of

log = logging.getLogger(__name__)

# Every audio record's sample rate (Kokoro's output): mono MP3 bodies, and the PCM they encode.
SAMPLE_RATE = 24_000


class _Record(msgspec.Struct, frozen=True, tag_field="e", omit_defaults=True):
    pass


class Meta(_Record, tag="meta", frozen=True):
    title: str
    voice: str
    chars: int
    sentences: int
    created_at: int  # ms since the epoch
    live: bool = False  # an open cast: its text arrives in fragments, `sentences` grows (0 at first)
    speed: float = 1.0  # the model's speed; omitted at 1.0, so older logs read unchanged


class Start(_Record, tag="start", frozen=True):
    attempt: int
    resume_from: int
    at: int  # ms since the epoch


class Audio(_Record, tag="audio", frozen=True):
    i: int  # sentence index
    t: str  # sentence text
    d: int  # duration in ms, exact
    o: int  # start in ms on the cast timeline
    n: int = 0  # live casts: the sentences planned so far (the plan grows); 0 (omitted) otherwise
    # its words: (text, start ms, end ms) from the start of this chunk's audio (add o for the cast's)
    w: tuple[tuple[str, int, int], ...] = ()
    c: bool = False  # made from synth's chunk cache, not by the model (omitted when not: older logs decode)
    body: bytes = b""  # the MP3 chunk; stored in field ``b``, never inside ``h``


class Eos(_Record, tag="eos", frozen=True):
    sentences: int
    audio_ms: int
    attempts: int
    cancelled: bool = False  # cut short by a cancel: the text after `sentences` was dropped (omitted if not)


class Error(_Record, tag="error", frozen=True):
    reason: str
    attempts: int


class Queued(_Record, tag="queue", frozen=True):
    """The cast waits before its first audio, for a worker with room for it: ``pos`` is its place
    in line (1: next), ``eta_ms`` about how long until its audio starts (omitted while unknown).
    Only before a ``start`` (or after an ``error``, the cast submitted again)."""

    pos: int
    eta_ms: int = -1  # -1 (omitted): no worker has measured its speed yet


Record = Meta | Start | Audio | Eos | Error | Queued
KINDS = {"meta", "start", "audio", "eos", "error", "queue"}


def kind_of(record: Record) -> str:
    return type(record).__struct_config__.tag  # type: ignore[return-value]


def is_terminal(record: Record) -> bool:
    return isinstance(record, (Eos, Error))


class Entry(msgspec.Struct, frozen=True):
    """One decoded record with its place in the log."""

    seq_num: int
    record: Record
    ts: int = 0  # ms since the epoch when Redis appended it (0 when unknown)

    @property
    def kind(self) -> str:
        return kind_of(self.record)


# The one JSON encoder of castlog and everything above it (structs and plain data alike).
encode_json = msgspec.json.Encoder().encode
_decoder = msgspec.json.Decoder(Record)
_warned_kinds: set[str] = set()


def encode_fields(record: Record) -> list[bytes]:
    """The flat ``e, h, b`` field list that the append script writes (``b`` may be empty)."""
    body = b""
    if isinstance(record, Audio):
        body = record.body
        record = msgspec.structs.replace(record, body=b"")
    return [kind_of(record).encode(), encode_json(record), body]


def encode_headers(record: Record) -> bytes:
    """The record as JSON without its body (what ``h`` holds)."""
    return encode_fields(record)[1]


def decode_fields(fields: dict[bytes, bytes]) -> Record | None:
    """Decode one stream entry; None (logged once per kind) for a kind this version does not know."""
    kind = fields.get(b"e", b"").decode()
    if kind not in KINDS:
        if kind not in _warned_kinds:
            _warned_kinds.add(kind)
            log.warning("skipping cast log record of unknown kind %r (written by a newer version?)", kind)
        return None
    record = _decoder.decode(fields[b"h"])
    if isinstance(record, Audio):
        record = msgspec.structs.replace(record, body=fields.get(b"b", b""))
    return record


def decode_entry(entry_id: bytes | str, fields: dict[bytes, bytes]) -> Entry | None:
    record = decode_fields(fields)
    if record is None:
        return None
    ts = fields.get(b"ts")
    return Entry(seq_of(entry_id), record, int(ts) if ts else 0)


def decode_rows(rows: Iterable[Row]) -> list[Entry]:
    """The records of ``rows`` (as XRANGE gives them), those of unknown kinds skipped."""
    return [e for e in (decode_entry(i, f) for i, f in rows) if e is not None]


# ---- the public JSON form ---------------------------------------------------------------------
# What the read API serves (records, SSE data, `/v1` SSE): ``{"seq_num", "kind", "ts", "headers",
# "body"}``; the headers are the record's fields as stored (no tag, no body, defaults left out)
# and the body is base64 (audio) or null. Edge writes it, clients (the CLI) read it back.


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


def from_public(obj: Mapping[str, Any]) -> Entry | None:
    """The entry a public JSON record stands for; None for a kind this version does not know.
    Raises ``msgspec.ValidationError`` for a record of a known kind that does not fit it."""
    kind = obj.get("kind")
    if kind not in KINDS:
        return None
    record = msgspec.convert({**obj.get("headers", {}), "e": kind}, Record)
    body = obj.get("body")
    if isinstance(record, Audio) and body:
        record = msgspec.structs.replace(record, body=base64.b64decode(body))
    return Entry(int(obj["seq_num"]), record, int(obj.get("ts") or 0))
