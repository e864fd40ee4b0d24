"""Moving the key lanes' jobs into the workers' inboxes.

A cast's key lane (keys.py, design.md "Key lanes"; not synth's lane) is the hash slot its keys
share. A submit writes its job into its key lane's stream (``jobs/lane/{lN}``, ``jobs/live/lane/{lN}``), in
the same script and slot as the claim and the catalog entry (keys.py). Workers take jobs from
the two global streams ``jobs`` and ``jobs/live`` (one slot: their rate is the submit rate, far
below what one Redis node serves). A :class:`LaneMover` reads every lane through the consumer
group ``lanes`` and re-adds each job there, then acknowledges and deletes it from its lane.

On a single Redis a mover blocks on one XREADGROUP over every lane. A cluster refuses a read
whose keys lie in several slots, so there the writer of a job rings ``jobs/bell`` after it
(:class:`Bell`: the lane's stream, its own step) and a mover blocks on the bell, then reads the
lanes rung; every ``refresh_s`` it also sweeps every lane, for a bell lost to a writer's crash.

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
from .batching import ScriptBatcher

# Jobs moved per lane per sweep.
MOVE_BATCH = 64
# Bells kept in jobs/bell (approximately) and read per round trip: movers read it as it grows.
BELL_MAXLEN = 10_000
BELL_BATCH = 512


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
        self._bell_after = "0-0"  # set by open(): bells before it are covered by the first sweep
        self._full: set[str] = set()  # lanes that gave a whole batch: read again without a bell

    async def open(self) -> None:
        """Create the group on every lane stream (and the streams) unless they exist."""
        pipe = self.redis.pipeline(transaction=False)
        for stream, _ in self.streams:
            pipe.xgroup_create(stream, keys.LANE_GROUP, id="0", mkstream=True)
        for reply in await pipe.execute(raise_on_error=False):
            if isinstance(reply, ResponseError) and "BUSYGROUP" not in str(reply):
                raise reply
        last = cast(keys.Rows, await self.redis.xrevrange(keys.JOBS_BELL, count=1))
        self._bell_after = _str(last[0][0]) if last else "0-0"

    async def sweep(self, block_ms: int, *, pending: bool = False) -> int:
        """Move what the lanes hold; ``pending``: this consumer's unacknowledged entries (after
        a restart) and those of movers dead for ``lease_ms``, and on a cluster every lane, rung
        or not. Returns how many jobs moved."""
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
            if pending:
                streams = {s for s, _ in self.streams}
            else:
                streams = self._full | await self._rung(None if self._full else block_ms)
            pipe = self.redis.pipeline(transaction=False)
            for stream in streams:
                pipe.xreadgroup(keys.LANE_GROUP, self.consumer, {stream: ">"}, count=MOVE_BATCH)
            read = [row for reply in await pipe.execute() for row in _rows(reply)]
            self._full = {stream for stream, entries in read if len(entries) >= MOVE_BATCH}
            rows += read
        return await self._move(rows)

    async def _rung(self, block_ms: int | None) -> set[str]:
        """The lanes rung since the last read of the bell, waiting up to ``block_ms`` for one."""
        reply = await self.redis.xread({keys.JOBS_BELL: self._bell_after}, count=BELL_BATCH, block=block_ms)
        rung: set[str] = set()
        for _, entries in _rows(reply):
            for entry_id, fields in entries:
                self._bell_after = _str(entry_id)
                stream = _str(fields.get(b"s", b""))
                if stream in self._target:
                    rung.add(stream)
        return rung

    async def _pending(self) -> list[tuple[str, list[Any]]]:
        """This consumer's unacknowledged entries and those claimed from dead movers, every lane
        in one pipeline (a cluster pipeline: one round trip per node), each entry once."""
        pipe = self.redis.pipeline(transaction=False)
        for stream, _ in self.streams:
            pipe.xreadgroup(keys.LANE_GROUP, self.consumer, {stream: "0"}, count=MOVE_BATCH)
            pipe.xautoclaim(stream, keys.LANE_GROUP, self.consumer, self.lease_ms, "0-0", count=MOVE_BATCH)
        replies = await pipe.execute()
        out: list[tuple[str, list[Any]]] = []
        for (stream, _), own, (_, claimed, *_) in zip(self.streams, replies[::2], replies[1::2]):
            entries = [e for _, rows in _rows(own) for e in rows]
            seen = {e[0] for e in entries}
            entries += [e for e in claimed if e[0] not in seen]  # an own entry idle past the lease: once
            out.append((stream, entries))
        return out

    async def _move(self, rows: list[tuple[str, list[Any]]]) -> int:
        """Re-add the jobs read to their target in arrival order across the lanes (entry ids are
        Redis's clock: a burst of submits into several lanes is queued as it came, so admission's
        first come, first served and the places in line hold; two lanes' jobs of one millisecond
        may swap), then acknowledge and drop them."""
        found: dict[str, list[tuple[tuple[int, int], str, Any, Any]]] = {}
        for stream, entries in rows:
            for entry_id, fields in entries:
                if fields:  # (a deleted entry's hole has none)
                    found.setdefault(self._target[stream], []).append((_id_key(entry_id), stream, entry_id, fields))
        moved = 0
        for target, jobs in found.items():
            jobs.sort(key=lambda job: job[0])
            # the re-adds and their WAIT on one connection (a cluster pipeline: one per node)
            pipe = self.redis.pipeline(transaction=False)
            for _, _, _, fields in jobs:
                pipe.xadd(target, fields)
            if self.replicas:
                where = {} if self.single_redis else {"target_nodes": cast(RedisCluster, self.redis).get_node_from_key(target)}
                pipe.execute_command("WAIT", self.replicas, self.wait_ms, **where)
            replies = await pipe.execute()
            if self.replicas and int(replies[-1]) < self.replicas:
                continue  # not known to survive a failover: left pending, moved again later
            by_lane: dict[str, list[Any]] = {}
            for _, stream, entry_id, _ in jobs:
                by_lane.setdefault(stream, []).append(entry_id)
            # each lane's slot: acknowledge and drop in one round trip (a transit, not a log)
            pipe = self.redis.pipeline(transaction=False)
            for stream, ids in by_lane.items():
                pipe.xack(stream, keys.LANE_GROUP, *ids)
                pipe.xdel(stream, *ids)
            await pipe.execute()
            moved += len(jobs)
        return moved


# KEYS[1]: jobs/bell; ARGV[1]: a key lane's job stream that just got a job, ARGV[2]: the bell's
# cap. A script only so that a ScriptBatcher sends the rings of one loop turn in one round trip.
RING = "return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 's', ARGV[1])"


class Bell:
    """Tells the movers of a cluster that a key lane's job stream holds a new job; one per writer
    (CastStore, LiveStore). The rings made in one loop turn share a round trip (ScriptBatcher):
    a busy intake rings once per submit, and ringing one by one halved its submits/s on a
    cluster (bench_cluster.py). A single Redis's mover blocks on every lane at once: no ring."""

    def __init__(self, redis: Redis) -> None:
        self.rings = ScriptBatcher(redis, RING) if isinstance(redis, RedisCluster) else None

    async def ring(self, stream: str) -> None:
        if self.rings is not None:
            await self.rings(keys=[keys.JOBS_BELL], args=[stream, BELL_MAXLEN])


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


def _id_key(entry_id: bytes | str) -> tuple[int, int]:
    ms, _, seq = _str(entry_id).partition("-")
    return int(ms), int(seq or 0)


def _str(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
