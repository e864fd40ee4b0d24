"""The cast log's writes over one Redis client: conditional append, submit.

Every read of a cast log is :class:`castlog.reader.LogReader`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple, cast

from redis.asyncio import Redis

from . import keys, scripts
from .batching import NotReplicated, ScriptBatcher
from .keys import Rows
from .lanes import Bell
from .ratelimit import RateLimited, RateLimiter
from .records import Meta, Record, encode_fields, encode_headers

SubmitResult = Literal["new", "existing", "reenqueued"]


class SeqMismatch(Exception):
    """A conditional append found another tail: somebody else owns the log now."""

    def __init__(self, cast_id: str, expected: int, tail: int) -> None:
        super().__init__(f"cast {cast_id}: append expected tail {expected}, log is at {tail}")
        self.cast_id = cast_id
        self.expected = expected
        self.tail = tail


class Stamped(NamedTuple):
    """What a conditional append answers: the log's new tail, and the stamp (``ts``, Redis's
    clock in ms) that every record of that append carries."""

    tail: int
    ts: int


class CastStore:
    """One per process. Scripts are registered once; every method is one or few round trips.
    The reads are :class:`~castlog.reader.LogReader`'s."""

    def __init__(self, redis: Redis, *, replicas: int = 0, wait_ms: int = 0) -> None:
        """``replicas`` > 0: a submit is answered only once its writes reached that many
        replicas (WAIT, up to ``wait_ms``); else it raises batching.NotReplicated."""
        self.redis = redis
        self._append = redis.register_script(scripts.APPEND)
        # Submits arrive many at a time on a busy intake: those of one loop turn share a round trip.
        self._submit = ScriptBatcher(redis, scripts.SUBMIT, replicas=replicas, wait_ms=wait_ms)
        self.bell = Bell(redis)  # on a cluster: the movers' bell after each new job

    async def append(self, cast_id: str, match_seq_num: int, records: Sequence[Record]) -> int:
        """Append ``records`` at ``match_seq_num`` if the tail is exactly there; return the new tail.

        Raises :class:`SeqMismatch` (carrying the real tail) when it is not. Retry-safe: when
        the client resends an append whose reply was lost, the records already standing at
        ``match_seq_num`` are this very append's, and it answers as the first call would have.
        """
        return (await self.append_stamped(cast_id, match_seq_num, records)).tail

    async def append_stamped(self, cast_id: str, match_seq_num: int, records: Sequence[Record]) -> Stamped:
        """:meth:`append`, answering the stamp its records got too (a writer that needs it, the
        worker's receipt, never reads its records back for it)."""
        if not records:
            raise ValueError("append needs at least one record")
        fields = [encode_fields(record) for record in records]
        args: list[bytes | int] = [match_seq_num]
        for triple in fields:
            args.extend(triple)
        ok, tail, *stamp = await self._append(keys=[keys.cast_key(cast_id)], args=args)
        tail = int(tail)
        if ok:
            return Stamped(tail, int(stamp[0]))
        if tail == match_seq_num + len(records):
            ts = await self._holds(cast_id, match_seq_num, fields)
            if ts is not None:
                return Stamped(tail, ts)
        raise SeqMismatch(cast_id, match_seq_num, tail)

    async def _holds(self, cast_id: str, seq_num: int, fields: list[list[bytes]]) -> int | None:
        """The stamp of these encoded records when the log holds exactly them from ``seq_num`` on;
        None when it does not.

        Every attempt opens with its own ``start`` (attempt number, time), so two writers never
        hold identical records at one position: a match can only be our own earlier write.
        """
        rows = cast(Rows, await self.redis.xrange(
            keys.cast_key(cast_id), min=keys.entry_id(seq_num), max=keys.entry_id(seq_num + len(fields) - 1)
        ))
        stored = [[f.get(b"e", b""), f.get(b"h", b""), f.get(b"b", b"")] for _, f in rows]
        return int(rows[0][1].get(b"ts", b"0")) if stored == fields else None

    async def submit(
        self,
        cast_id: str,
        text: str,
        voice: str,
        meta: Meta,
        *,
        limit: tuple[RateLimiter, str] | None = None,
        client: str = "",
    ) -> SubmitResult:
        """Claim the cast, write its recipe, ``meta`` and one job in one atomic step; the job and
        a new recipe carry ``client``, the submitter's :func:`~castlog.live.client_tag` (workers
        admit clients in turn; only the same tenant's key cancels the cast).

        With ``limit`` (a limiter and a client) the client's token is taken first, in its own
        step (a client's bucket and a cast's lane are different slots in a cluster); when the
        bucket has none nothing else is written and :class:`RateLimited` is raised.
        """
        submit_keys = [keys.cast_key(cast_id), keys.catalog_key(cast_id), keys.lane_jobs_of(cast_id)]
        args: list[str | bytes | float | int] = [cast_id, voice, text, meta.title, encode_headers(meta), client]
        if limit is not None:
            limiter, client = limit
            verdict = await limiter.take(client)
            if not verdict.allowed:
                raise RateLimited(verdict)
        try:
            result = cast(SubmitResult, keys.decoded(await self._submit(keys=submit_keys, args=args)))
        except NotReplicated as unconfirmed:  # the job stands all the same: ring for it
            if keys.decoded(unconfirmed.answer) != "existing":
                await self.bell.ring(submit_keys[2])
            raise
        if result != "existing":
            await self.bell.ring(submit_keys[2])
        return result
