"""The shared streams read back whole, and a job added by hand: what benchmarks and tests look at
from outside. The services never do this: workers take ``jobs`` through their consumer group,
the archiver its receipts through its own, and operators read ``jobs/dead`` with redis-cli."""

from __future__ import annotations

from typing import Any, TypeVar, cast

from redis.asyncio import Redis

from castlog import Done, keys
from castlog.keys import Rows
from castlog.streams import DeadLetter, Job, TypedEntry, decode_or_none, encode

E = TypeVar("E", bound=TypedEntry)


async def enqueue(redis: Redis, job: Job, stream: str = keys.JOBS) -> str:
    """Add a job by hand (the submit and open scripts add theirs); returns its entry id."""
    return keys.decoded(await redis.xadd(stream, dict[Any, Any](encode(job))))


async def read_jobs(redis: Redis, stream: str = keys.JOBS) -> list[Job]:
    """Every well-formed job in ``stream``, oldest first; for ``jobs`` and ``jobs/live``, the jobs
    still in the lanes (keys.py) come first, by their time (two lanes' jobs of the same
    millisecond in either order)."""
    rows: Rows = []
    if stream in (keys.JOBS, keys.JOBS_LIVE):
        lane = keys.jobs_live_lane_key if stream == keys.JOBS_LIVE else keys.jobs_lane_key
        for n in range(keys.LANES):
            rows += cast(Rows, await redis.xrange(lane(n)))
        rows.sort(key=lambda row: tuple(int(part) for part in row[0].split(b"-")))
    return _decoded(Job, rows + cast(Rows, await redis.xrange(stream)))


async def read_dead(redis: Redis) -> list[DeadLetter]:
    return _decoded(DeadLetter, cast(Rows, await redis.xrange(keys.JOBS_DEAD)))


async def read_done(redis: Redis) -> list[Done]:
    """Every well-formed receipt, oldest first."""
    return _decoded(Done, cast(Rows, await redis.xrange(keys.PROGRESS_DONE)))


def _decoded(kind: type[E], rows: Rows) -> list[E]:
    return [e for e in (decode_or_none(kind, fields) for _id, fields in rows) if e is not None]
