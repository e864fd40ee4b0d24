"""Moving the key lanes' jobs into the workers' inboxes.

A cast's key lane (keys.py, design.md "Key lanes"; not synth's lane) is the hash slot its keys
share. A submit writes its job into its key lane's stream (``jobs/lane/{lN}``, ``jobs/live/lane/{lN}``), in
the same script and slot as the claim and the catalog entry (keys.py). Workers take jobs from
the two global streams ``jobs`` and ``jobs/live`` (one slot: their rate is the submit rate, far
below what one Redis node serves). A :class:`LaneMover` reads every lane as one consumer of the
group ``lanes`` (groups.py) and re-adds each job there, then acknowledges and drops it from its lane.

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

from collections import Counter
from typing import Any, cast

from redis.asyncio import Redis, RedisCluster

from . import keys
from .batching import ScriptBatcher
from .groups import Consumer, StreamEntry, pairs
from .streams import newest_id

# Jobs moved per lane per sweep.
MOVE_BATCH = 64
# Bells kept in jobs/bell (approximately) and read per round trip: movers read it as it grows.
BELL_MAXLEN = 10_000
BELL_BATCH = 512


class LaneMover:
    """One per worker process: ``consumer`` is its name in the group ``lanes``."""

    def __init__(
        self, redis: Redis, consumer: str, *, lease_ms: int, single_redis: bool, replicas: int = 0, wait_ms: int = 0
    ) -> None:
        self.redis, self.replicas, self.wait_ms = redis, replicas, wait_ms
        # every lane's stream -> the inbox its jobs go to
        self._target = {keys.jobs_lane_key(n): keys.JOBS for n in range(keys.LANES)}
        self._target.update({keys.jobs_live_lane_key(n): keys.JOBS_LIVE for n in range(keys.LANES)})
        # A single Redis takes one blocking XREADGROUP over every lane; a cluster refuses keys of
        # several slots in one call, so there a sweep sends one non-blocking read per lane
        # (pipelined: one round trip per node) and the caller paces the sweeps.
        self.single_redis = single_redis
        self.group = Consumer(redis, keys.LANE_GROUP, consumer, list(self._target), lease_ms=lease_ms,
                              one_read=single_redis)
        self._bell_after = "0-0"  # set by open(): bells before it are covered by the first sweep
        self._full: set[str] = set()  # lanes that gave a whole batch: read again without a bell

    async def open(self) -> None:
        """Create the group on every lane stream (and the streams) unless they exist."""
        await self.group.create()
        self._bell_after = await newest_id(self.redis, keys.JOBS_BELL)

    async def sweep(self, block_ms: int, *, pending: bool = False) -> int:
        """Move what the lanes hold; ``pending``: this consumer's unacknowledged entries (after
        a restart) and those of movers dead for ``lease_ms``, and on a cluster every lane, rung
        or not. Returns how many jobs moved."""
        found = await self._pending() if pending else []
        if self.single_redis:
            found += await self.group.new(MOVE_BATCH, None if found else block_ms)
        else:
            rung = set(self._target) if pending else self._full | await self._rung(None if self._full else block_ms)
            read = await self.group.new(MOVE_BATCH, streams=rung)
            self._full = {stream for stream, n in Counter(e.stream for e in read).items() if n >= MOVE_BATCH}
            found += read
        return await self._move(found)

    async def _rung(self, block_ms: int | None) -> set[str]:
        """The lanes rung since the last read of the bell, waiting up to ``block_ms`` for one."""
        reply = await self.redis.xread({keys.JOBS_BELL: self._bell_after}, count=BELL_BATCH, block=block_ms)
        rung: set[str] = set()
        for _, entries in pairs(reply):
            for entry_id, fields in entries:
                self._bell_after = keys.decoded(entry_id)
                stream = keys.decoded(fields.get(b"s", b""))
                if stream in self._target:
                    rung.add(stream)
        return rung

    async def _pending(self) -> list[StreamEntry]:
        """This consumer's unacknowledged entries and those claimed from dead movers, each once."""
        own = await self.group.own(MOVE_BATCH)
        seen = {(e.stream, e.id) for e in own}
        return own + [e for e in await self.group.claim(MOVE_BATCH) if (e.stream, e.id) not in seen]

    async def _move(self, found: list[StreamEntry]) -> int:
        """Re-add the jobs read to their target in arrival order across the lanes (entry ids are
        Redis's clock: a burst of submits into several lanes is queued as it came, so admission's
        first come, first served and the places in line hold; two lanes' jobs of one millisecond
        may swap), then acknowledge and drop them."""
        by_target: dict[str, list[StreamEntry]] = {}
        for entry in found:
            by_target.setdefault(self._target[entry.stream], []).append(entry)
        moved = 0
        for target, jobs in by_target.items():
            jobs.sort(key=lambda job: keys.id_order(job.id))
            # the re-adds and their WAIT on one connection (a cluster pipeline: one per node)
            pipe = self.redis.pipeline(transaction=False)
            for job in jobs:
                pipe.xadd(target, dict[Any, Any](job.fields))
            if self.replicas:
                where = {} if self.single_redis else {"target_nodes": cast(RedisCluster, self.redis).get_node_from_key(target)}
                pipe.execute_command("WAIT", self.replicas, self.wait_ms, **where)
            replies = await pipe.execute()
            if self.replicas and int(replies[-1]) < self.replicas:
                continue  # not known to survive a failover: left pending, moved again later
            await self.group.ack(jobs, drop=True)  # each lane's slot: a transit, not a log
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
