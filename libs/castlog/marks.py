"""What a cast log holds now, told cheaply: its length, its last record and the stamps (``ts``)
of records a reader already has, so that caches and cursors notice a log that shrank or was
rewritten (Redis lost its last second of writes, or a failover reached a replica that lagged).
Two small scripts; no bodies travel."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import NoScriptError

from . import keys, scripts

# The stamp the scripts give for a record of an archived log: it stands, in the archive.
ARCHIVED = -1
PREV_FIELD = b"p"  # a record's predecessor's stamp (castlog's APPEND writes it)


def holds(found: int | None, seq: int, ts: int | None) -> bool:
    """Whether the record a reader has at ``seq`` with stamp ``ts`` is still the one stored,
    given the stamp ``found`` there now (None: nothing there; ARCHIVED: archived unchanged). A
    reader that has no record there (seq -1) or does not know its stamp (it asked to start
    ahead) has nothing to lose."""
    if seq < 0 or ts is None or found == ARCHIVED:
        return True
    return found == ts


def follows(fields: dict[bytes, bytes], ts: int | None) -> bool:
    """Whether a record (its ``fields``) names ``ts`` as its predecessor's stamp: the append that
    wrote it found the record with that stamp at the tail, so a reader holding it needs no check."""
    return ts is not None and fields.get(PREV_FIELD) == str(ts).encode()


@dataclass(frozen=True)
class Mark:
    """One log as it stands: ``length`` records, the last at ``last_seq`` (-1: empty) with
    stamp ``last_ts``; ``ts_at`` is the stamp of the record asked about (None: not there)."""

    length: int
    last_seq: int
    last_ts: int | None
    ts_at: int | None


async def stamps(redis: Redis, asked: Sequence[tuple[str, int]]) -> list[int | None]:
    """The stamp of the record at each ``(cast_id, seq)`` (None: not there), in one round trip on
    a single Redis; on a Redis Cluster one script per hash slot (a script's keys share one), at once."""
    if not asked:
        return []
    names = [keys.cast_key(c) for c, _ in asked]
    if not isinstance(redis, RedisCluster):
        return [_int(v) for v in await read_only(redis, scripts.STAMPS, names, [s for _, s in asked])]
    by_slot: dict[int, list[int]] = {}  # slot -> indexes into asked
    for i, name in enumerate(names):
        by_slot.setdefault(redis.keyslot(name), []).append(i)
    replies = await asyncio.gather(*(
        read_only(redis, scripts.STAMPS, [names[i] for i in idx], [asked[i][1] for i in idx]) for idx in by_slot.values()
    ))
    out: list[int | None] = [None] * len(asked)
    for idx, reply in zip(by_slot.values(), replies):
        for i, v in zip(idx, reply):
            out[i] = _int(v)
    return out


async def mark(redis: Redis, cast_id: str, seq: int = -1) -> Mark:
    """The log's :class:`Mark`, with the stamp of the record at ``seq`` (-1: none asked)."""
    reply = await read_only(redis, scripts.MARK, [keys.cast_key(cast_id)], [seq])
    length, last_id, last_ts, ts_at = (list(reply) + [None] * 4)[:4]
    return Mark(int(length), keys.seq_of(last_id) if last_id else -1, _int(last_ts), _int(ts_at))


async def read_only(redis: Redis, script: str, names: list[str], args: Sequence[Any]) -> Any:
    """Run a script that only reads, as such (EVALSHA_RO): a reader whose ACL lets it only read
    the cast logs (edge) may run it; the first call on a server loads it (EVAL_RO)."""
    sha = _sha(script)
    try:
        return await redis.evalsha_ro(sha, len(names), *names, *args)
    except NoScriptError:
        return await redis.eval_ro(script, len(names), *names, *args)


@cache  # a handful of scripts
def _sha(script: str) -> str:
    """The script's SHA-1, hashed once per script (the tail's checks and header reads run often)."""
    return hashlib.sha1(script.encode()).hexdigest()  # Redis names scripts by SHA-1


def _int(value: Any) -> int | None:
    return int(value) if value else None  # Redis sends Lua's false as None
