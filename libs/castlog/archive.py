"""The archived form of a finished cast log (see "The archive" in docs/design.md).

A finished log is packed into one blob (the playable audio first, then any other audio bodies)
and a descriptor: where the blob is, its size and SHA-256, and an index of every record (its
seq, kind, ts, raw headers and the byte range of its body). The archive script rewrites the log
into its ``eos`` entry carrying the descriptor in field ``a``; :func:`rows` turns a descriptor
back into the rows that XRANGE returned before, bodies supplied by the caller.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import msgspec
from redis.asyncio import Redis

from . import keys, scripts
from .keys import Row
from .records import decode_rows, encode_json
from .state import playable

# One index row: seq, kind, ts, headers (raw JSON), body offset in the blob (-1: none), body size
IndexRow = tuple[int, str, int, msgspec.Raw, int, int]
TRASH = keys.ARCHIVE_TRASH
PLAYED = keys.ARCHIVE_PLAYED
ARCHIVE_FIELD = b"a"
# The index is mostly the chunks' texts: compressed, it takes about half the memory.
ZLIB_LEVEL = 9


class Descriptor(msgspec.Struct, frozen=True):
    key: str  # the blob's name in the store
    size: int
    sha256: str
    playable: int  # bytes of the playable prefix: the cast's whole /audio.mp3
    tail: int
    index: list[IndexRow]


_decoder = msgspec.json.Decoder(Descriptor)


@dataclass(frozen=True)
class Packed:
    blob: bytes
    descriptor: Descriptor

    def encoded(self) -> bytes:
        return zlib.compress(encode_json(self.descriptor), ZLIB_LEVEL)


def blob_key(cast_id: str, eos_ts: int, sha256: str) -> str:
    """Named by the log's eos time and content: a retry writes the same name, a cast deleted and
    made again gets a new one (so removing the old blob never hits the new)."""
    return f"casts/{cast_id}/{eos_ts}-{sha256[:16]}.bin"


def pack(cast_id: str, rows: list[Row]) -> Packed:
    """The blob and descriptor of a finished log, from its raw rows (ids 0-1 .. 0-n)."""
    order = [e.seq_num for e in playable(decode_rows(rows))]
    bodies = {keys.seq_of(i): f.get(b"b", b"") for i, f in rows if f.get(b"b")}
    heard = set(order)
    order += [s for s in sorted(bodies) if s not in heard]
    offsets, pieces, at = {}, [], 0
    for seq in order:
        offsets[seq] = at
        pieces.append(bodies.get(seq, b""))
        at += len(pieces[-1])
    n_playable = sum(len(bodies.get(seq, b"")) for seq in heard)
    blob = b"".join(pieces)
    sha = hashlib.sha256(blob).hexdigest()
    index: list[IndexRow] = []
    for raw_id, f in rows:
        seq = keys.seq_of(raw_id)
        body = bodies.get(seq)
        index.append((seq, f[b"e"].decode(), int(f.get(b"ts", b"0")), msgspec.Raw(f[b"h"]),
                      offsets[seq] if body else -1, len(body) if body else 0))
    eos_ts = int(rows[-1][1].get(b"ts", b"0"))
    tail = keys.seq_of(rows[-1][0]) + 1
    return Packed(blob, Descriptor(blob_key(cast_id, eos_ts, sha), len(blob), sha, n_playable, tail, index))


def descriptor_of(fields: dict[bytes, bytes]) -> Descriptor | None:
    """The descriptor an archived log's last entry carries, None on any other entry."""
    raw = fields.get(ARCHIVE_FIELD)
    return _decoder.decode(zlib.decompress(raw)) if raw else None


def rows(d: Descriptor, first: int, last: int, bodies: dict[int, bytes]) -> list[Row]:
    """The rows of records ``first..last`` (seq, inclusive) as XRANGE gave them before the
    archive, less ``p`` (the predecessor's stamp: only edge's shared tail reads it, and an archived
    log is never tailed), each audio body taken from ``bodies`` (seq -> bytes; empty when not given)."""
    out: list[Row] = []
    for seq, kind, ts, headers, offset, _size in d.index:
        if first <= seq <= last:
            fields = {b"e": kind.encode(), b"h": bytes(headers), b"ts": str(ts).encode()}
            if offset >= 0:
                fields[b"b"] = bodies.get(seq, b"")
            out.append((keys.entry_id(seq).encode(), fields))
    return out


def spans(d: Descriptor, seqs: Iterable[int]) -> dict[int, tuple[int, int]]:
    """seq -> (offset, size) in the blob, of those of ``seqs`` that have a body."""
    wanted = set(seqs)
    return {seq: (off, size) for seq, _k, _t, _h, off, size in d.index if seq in wanted and off >= 0}


async def commit(redis: Redis, cast_id: str, packed: Packed) -> int:
    """Rewrite the log into its archived form, drop the catalog: 1 done, 0 already archived,
    -1 the log is not the finished log that was packed (changed, deleted, not finished)."""
    d = packed.descriptor
    args: list[bytes | str | int] = [d.tail, packed.encoded(), d.key]
    script = redis.register_script(scripts.ARCHIVE)
    return int(await script(keys=[keys.cast_key(cast_id), keys.catalog_key(cast_id)], args=args))


async def delete(redis: Redis, cast_id: str) -> bool:
    """Remove the cast's log, catalog and played mark, trash its blob; False: no such cast.

    The log and catalog go in one step (one lane); the blob is trashed after it, so a crash in
    between leaves a blob nobody reads (space, never a cast whose audio was removed)."""
    script = redis.register_script(scripts.DELETE)
    existed, blob = await script(keys=[keys.cast_key(cast_id), keys.catalog_key(cast_id)])
    if blob:
        await redis.xadd(TRASH, {"key": blob})
    await redis.zrem(PLAYED, cast_id)
    return bool(existed)
