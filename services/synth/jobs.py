"""The consumer group ``synth`` on ``jobs`` (and on ``jobs/live``, the open casts'): delivery, leases, acknowledgement.

The entries themselves (:class:`castlog.streams.Job`, the dead letters, the receipts) are typed in castlog.

Its reads (own pending entries, take-overs after the lease, new ones) are castlog's consumer
shape (:class:`castlog.Consumer`, driven by inbox.py); here is what only jobs need: retries,
lease refreshes, hand-backs, tallies, an XACK that drops the tally too. Thin, stateless wrappers,
one job each, so that the worker reads as policy. Facts of Redis they rely on (redis-server 7.0):

- the delivery count rises on ``XREADGROUP >``, on re-reading one's own pending entries
  (``XREADGROUP`` with id 0), on ``XCLAIM`` and on ``XAUTOCLAIM``; it is the attempt count;
- ``XCLAIM ... JUSTID`` resets an entry's idle time without counting a delivery: the lease
  refresh.

The delivery count is NOT the attempt count: restarts, hand-backs and take-overs deliver a job
again without any attempt having failed. A job's *tally* (``synth/tally/<entry id>``, a hash)
counts what does count: attempts that failed in the model or encoder, and the deaths of workers
while one chunk was in hand (a poison input that kills every worker that tries it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

import castlog
from castlog.groups import entries
from castlog.keys import decoded

from .cast import Assignment

log = logging.getLogger(__name__)

Fields = dict[bytes, bytes]
# Entries counted when XINFO cannot tell the group's lag (the count is capped there).
LAG_SCAN_LIMIT = 10_000
# A tally outlives its job by at most this (it is deleted with the XACK; this bounds a leak when
# a pending entry is deleted from the stream instead).
TALLY_TTL_S = 7 * 24 * 3600
# A job handed back is left this idle, so that a take-over's XAUTOCLAIM takes it at once too.
HANDED_BACK_IDLE_MS = 10 * 24 * 3600 * 1000


def parse_job(entry_id: str, fields: Fields, deliveries: int, stream: str = castlog.JOBS) -> Assignment | None:
    """The job of one ``jobs`` entry, or None when it is not a well-formed job."""
    try:
        entry = castlog.decode_job(fields)
    except castlog.Malformed:
        return None
    return Assignment(entry_id, entry.id, entry.enqueued_at, max(1, deliveries), stream)


async def claim(redis: Redis, consumer: str, entry_id: str, stream: str = castlog.JOBS) -> castlog.StreamEntry | None:
    """Deliver our own pending entry again (a retry): counts one more delivery."""
    rows: Any = await redis.xclaim(stream, castlog.GROUP, consumer, 0, [entry_id])
    return next(iter(entries(stream, rows)), None)


@dataclass(frozen=True)
class Pending:
    consumer: str
    deliveries: int


async def pending(redis: Redis, entry_ids: list[str], stream: str = castlog.JOBS) -> dict[str, Pending]:
    """Owner and delivery count of each of ``entry_ids`` still pending (absent: acknowledged)."""
    if not entry_ids:
        return {}
    async with redis.pipeline(transaction=False) as pipe:
        for entry_id in entry_ids:
            pipe.xpending_range(stream, castlog.GROUP, min=entry_id, max=entry_id, count=1)
        replies = await pipe.execute()
    out: dict[str, Pending] = {}
    for entry_id, rows in zip(entry_ids, replies):
        for row in rows:
            out[entry_id] = Pending(decoded(row["consumer"]), int(row["times_delivered"]))
    return out


async def refresh(redis: Redis, consumer: str, entry_ids: list[str], stream: str = castlog.JOBS) -> None:
    """Reset the idle time of entries we own, without counting a delivery."""
    if entry_ids:
        await redis.xclaim(stream, castlog.GROUP, consumer, 0, list[Any](entry_ids), justid=True)


async def ack(redis: Redis, entry_id: str, stream: str = castlog.JOBS) -> None:
    """The job is answered: acknowledge it, then drop its tally. Not one transaction: in a
    cluster the tally and the stream are different slots; a tally left by a crash in between
    expires (TALLY_TTL_S) and counts for nothing (its job is acknowledged)."""
    async with redis.pipeline(transaction=False) as pipe:
        pipe.xack(stream, castlog.GROUP, entry_id)
        pipe.delete(castlog.tally_key(entry_id))
        await pipe.execute()


@dataclass(frozen=True)
class Tally:
    """What counts against a job: ``failures`` (attempts that failed in the model or encoder),
    the chunk ``hand`` in hand when a worker last began one (-1: none), and ``crashes``, the
    deaths counted while chunk ``crash_i`` was in hand."""

    failures: int = 0
    hand: int = -1
    crash_i: int = -1
    crashes: int = 0


async def tally(redis: Redis, entry_id: str) -> Tally:
    raw: Any = await redis.hgetall(castlog.tally_key(entry_id))
    got = {decoded(k): int(v) for k, v in raw.items()}
    return Tally(**{k: got[k] for k in ("failures", "hand", "crash_i", "crashes") if k in got})


async def _tally_set(redis: Redis, entry_id: str, **fields: int) -> None:
    key = castlog.tally_key(entry_id)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hset(key, mapping=dict[Any, Any](fields))
        pipe.expire(key, TALLY_TTL_S)
        await pipe.execute()


async def mark_in_hand(redis: Redis, entry_id: str, index: int) -> None:
    """Chunk ``index`` is in hand (-1: none): a death before it is appended counts against it."""
    await _tally_set(redis, entry_id, hand=index)


async def release(redis: Redis, entry_ids: list[str]) -> None:
    """No chunk of these jobs is in hand any more (they are handed back whole)."""
    async with redis.pipeline(transaction=False) as pipe:
        for entry_id in entry_ids:
            pipe.hset(castlog.tally_key(entry_id), "hand", -1)
            pipe.expire(castlog.tally_key(entry_id), TALLY_TTL_S)
        await pipe.execute()


async def count_failure(redis: Redis, entry_id: str) -> int:
    """One more failed attempt; returns the failures so far."""
    key = castlog.tally_key(entry_id)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hincrby(key, "failures", 1)
        pipe.hset(key, "hand", -1)
        pipe.expire(key, TALLY_TTL_S)
        failures, _, _ = await pipe.execute()
    return int(failures)


async def count_death(redis: Redis, entry_id: str, was: Tally) -> int:
    """A worker died with chunk ``was.hand`` in hand; returns the deaths counted on that chunk."""
    crashes = was.crashes + 1 if was.crash_i == was.hand else 1
    await _tally_set(redis, entry_id, hand=-1, crash_i=was.hand, crashes=crashes)
    return crashes


# KEYS[1]: jobs; ARGV[1]: the group, ARGV[2]: our consumer, ARGV[3]: the hand-back consumer,
# ARGV[4]: the idle time to give them (ms), ARGV[5..]: entry ids
# Moves each entry that is still ours to the hand-back consumer (never one taken over meanwhile).
HAND_BACK = """
local n = 0
for i = 5, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)[1]
  if p and p[2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[i], 'IDLE', ARGV[4], 'JUSTID')
    n = n + 1
  end
end
return n
"""


async def hand_back(redis: Redis, consumer: str, entry_ids: list[str], stream: str = castlog.JOBS) -> int:
    """Give the jobs we still own to the group's hand-back consumer, idle enough for any worker
    to claim now; returns how many."""
    if not entry_ids:
        return 0
    script = redis.register_script(HAND_BACK)
    args: list[str | int] = [castlog.GROUP, consumer, castlog.HANDED_BACK, HANDED_BACK_IDLE_MS, *entry_ids]
    return int(await script(keys=[stream], args=args))


async def handed_back(redis: Redis, consumer: str, count: int, stream: str = castlog.JOBS) -> list[castlog.StreamEntry]:
    """Claim up to ``count`` handed-back jobs. Each is claimed only while still idle, so two
    workers racing for one never both get it."""
    rows: Any = await redis.xpending_range(
        stream, castlog.GROUP, min="-", max="+", count=count, consumername=castlog.HANDED_BACK
    )
    ids = [decoded(r["message_id"]) for r in rows]
    if not ids:
        return []
    claimed: Any = await redis.xclaim(stream, castlog.GROUP, consumer, HANDED_BACK_IDLE_MS // 2, list[Any](ids))
    return entries(stream, claimed)


async def remove_gone_consumers(redis: Redis, idle_ms: int, keep: str, stream: str = castlog.JOBS) -> list[str]:
    """Delete the consumers of group ``synth`` that hold nothing and were idle over ``idle_ms``
    (workers that are gone); a live one is re-created by its next read. Returns their names."""
    try:
        consumers: Any = await redis.xinfo_consumers(stream, castlog.GROUP)
    except ResponseError:  # no stream or group yet
        return []
    gone = [
        decoded(c["name"]) for c in consumers
        if int(c["pending"]) == 0 and int(c["idle"]) > idle_ms and decoded(c["name"]) not in (keep, castlog.HANDED_BACK)
    ]
    return [name for name in gone if await delete_consumer_if_empty(redis, name, stream)]


# KEYS[1]: jobs; ARGV[1]: the group, ARGV[2]: a consumer
# Deletes the consumer only if it holds no pending entry, in one step: deleting a consumer
# drops its pending entries, so a check and a delete apart could lose a job it just read.
DELETE_IF_EMPTY = """
if #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) > 0 then return 0 end
return redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2]) and 1
"""


async def delete_consumer_if_empty(redis: Redis, consumer: str, stream: str = castlog.JOBS) -> bool:
    """Remove ``consumer`` from the group if it holds nothing (a stopping worker, a gone one)."""
    script = redis.register_script(DELETE_IF_EMPTY)
    return bool(await script(keys=[stream], args=[castlog.GROUP, consumer]))


async def group_info(redis: Redis) -> dict[str, Any] | None:
    """XINFO GROUPS' entry for the group ``synth`` on ``jobs``; None before the stream or the group."""
    try:
        groups = await redis.xinfo_groups(castlog.JOBS)
    except ResponseError:  # no stream yet
        return None
    return next((g for g in groups if decoded(g["name"]) == castlog.GROUP), None)


async def queue_stats(redis: Redis) -> tuple[int, int]:
    """(entries not yet delivered to the group, that plus the group's pending entries)."""
    group = await group_info(redis)
    if group is None:
        return int(await redis.xlen(castlog.JOBS)), 0
    lag = group.get("lag")
    if lag is None:  # Redis cannot tell after deletions: count what follows the last delivery
        last = decoded(group["last-delivered-id"])
        rows: Any = await redis.xrange(castlog.JOBS, min=f"({last}", count=LAG_SCAN_LIMIT)
        lag = len(rows)
    depth = int(lag)
    return depth, depth + int(group["pending"])
