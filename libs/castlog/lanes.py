"""Moving the key lanes' jobs into the workers' inboxes.

A cast's key lane (keys.py, design.md "Key lanes"; not synth's lane) is the hash slot its keys
share. A submit writes its job into its key lane's stream (``jobs/lane/{lN}``, ``jobs/live/lane/{lN}``), in
the same script and slot as the claim and the catalog entry (keys.py). Workers take jobs from
the two global streams ``jobs`` and ``jobs/live`` (one slot: their rate is the submit rate, far
below what one Redis node serves). A :class:`LaneMover` reads every lane through the consumer
group ``lanes`` and re-adds each job there, then acknowledges and deletes it from its lane.

With ``replicas`` > 0 a moved job leaves its lane only once WAIT saw it on that many replicas
of the inbox's node: a failover of that node cannot lose a job whose lane entry is gone.

The move is at-least-once: a mover that dies between the XADD and the XACK leaves the lane entry
pending, another mover (or itself, restarted) moves it again after ``lease_ms``. A duplicate job
is harmless: a cast's appends are fenced by ``match_seq_num``, and a worker drops a job whose
log already ended.
"""

from __future__ import annotations

from typing import Any, cast

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import ResponseError

from . import keys

# Jobs moved per lane per sweep.
MOVE_BATCH = 64


def lane_streams() -> list[tuple[str, str]]:
    """(lane stream, the inbox its jobs go to) for every lane."""
    return [(keys.jobs_lane_key(n), keys.JOBS) for n in range(keys.LANES)] + [
        (keys.jobs_live_lane_key(n), keys.JOBS_LIVE) for n in range(keys.LANES)
    ]


class LaneMover:
    """One per worker process: ``consumer`` is its name in the group ``lanes``."""

    def __init__(
        self, redis: Redis, consumer: str, *, lease_ms: int, single_redis: bool, replicas: int = 0, wait_ms: int = 0
    ) -> None:
        self.redis, self.consumer, self.lease_ms = redis, consumer, lease_ms
        self.replicas, self.wait_ms = replicas, wait_ms
        # A single Redis takes one blocking XREADGROUP over every lane; a cluster refuses keys of
        # several slots in one call, so there a sweep sends one non-blocking read per lane
        # (pipelined: one round trip per node) and the caller paces the sweeps.
        self.single_redis = single_redis
        self.streams = lane_streams()
        self._target = dict(self.streams)

    async def open(self) -> None:
        """Create the group on every lane stream (and the streams) unless they exist."""
        pipe = self.redis.pipeline(transaction=False)
        for stream, _ in self.streams:
            pipe.xgroup_create(stream, keys.LANE_GROUP, id="0", mkstream=True)
        for reply in await pipe.execute(raise_on_error=False):
            if isinstance(reply, ResponseError) and "BUSYGROUP" not in str(reply):
                raise reply

    async def sweep(self, block_ms: int, *, pending: bool = False) -> int:
        """Move what the lanes hold; ``pending``: this consumer's unacknowledged entries (after
        a restart) and those of movers dead for ``lease_ms``. Returns how many jobs moved."""
        rows: list[tuple[str, list[Any]]] = []
        if pending:
            rows += await self._pending()
        if self.single_redis:
            got = await self.redis.xreadgroup(
                keys.LANE_GROUP, self.consumer, {s: ">" for s, _ in self.streams},
                count=MOVE_BATCH, block=None if rows else block_ms,
            )
            rows += _rows(got)
        else:
            pipe = self.redis.pipeline(transaction=False)
            for stream, _ in self.streams:
                pipe.xreadgroup(keys.LANE_GROUP, self.consumer, {stream: ">"}, count=MOVE_BATCH)
            for reply in await pipe.execute():
                rows += _rows(reply)
        return await self._move(rows)

    async def _pending(self) -> list[tuple[str, list[Any]]]:
        out: list[tuple[str, list[Any]]] = []
        for stream, _ in self.streams:
            own = await self.redis.xreadgroup(keys.LANE_GROUP, self.consumer, {stream: "0"}, count=MOVE_BATCH)
            out += _rows(own)
            _, claimed, *_ = await self.redis.xautoclaim(
                stream, keys.LANE_GROUP, self.consumer, self.lease_ms, "0-0", count=MOVE_BATCH
            )
            out.append((stream, claimed))
        return out

    async def _move(self, rows: list[tuple[str, list[Any]]]) -> int:
        moved = 0
        for stream, entries in rows:
            entries = [(i, f) for i, f in entries if f]  # a deleted entry's hole
            if not entries:
                continue
            target = self._target[stream]
            # the re-adds and their WAIT on one connection (a cluster pipeline: one per node)
            pipe = self.redis.pipeline(transaction=False)
            for _, fields in entries:
                pipe.xadd(target, fields)
            if self.replicas:
                where = {} if self.single_redis else {"target_nodes": cast(RedisCluster, self.redis).get_node_from_key(target)}
                pipe.execute_command("WAIT", self.replicas, self.wait_ms, **where)
            replies = await pipe.execute()
            if self.replicas and int(replies[-1]) < self.replicas:
                continue  # not known to survive a failover: left pending, moved again later
            ids = [i for i, _ in entries]
            # the lane's slot: acknowledge and drop in one round trip (a transit, not a log)
            pipe = self.redis.pipeline(transaction=False)
            pipe.xack(stream, keys.LANE_GROUP, *ids)
            pipe.xdel(stream, *ids)
            await pipe.execute()
            moved += len(entries)
        return moved


def _rows(reply: Any) -> list[tuple[str, list[Any]]]:
    """XREADGROUP's reply as (stream, entries), whether RESP2's list or RESP3's dict."""
    pairs = reply.items() if isinstance(reply, dict) else reply or ()
    return [(_str(stream), list(entries)) for stream, entries in pairs]


async def lane_jobs(redis: Redis, *, live: bool = False) -> list[tuple[str, Any]]:
    """Every job waiting in a lane (not moved yet), lane by lane: for tools and tests."""
    out: list[tuple[str, Any]] = []
    for n in range(keys.LANES):
        stream = keys.jobs_live_lane_key(n) if live else keys.jobs_lane_key(n)
        out += [(stream, row) for row in list(await redis.xrange(stream) or ())]
    return out


def _str(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
