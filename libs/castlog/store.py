"""The cast log API over one Redis client: conditional append, submit, read and follow."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Literal, cast

from redis.asyncio import Redis

from . import keys, scripts
from .batching import ScriptBatcher
from .ratelimit import RateLimited, RateLimiter, Verdict
from .records import Entry, Meta, Record, decode_entry, encode_fields, encode_headers, is_terminal
from .streams import Recipe, read_recipe

SubmitResult = Literal["new", "existing", "reenqueued"]
# What XRANGE and XREAD give a client with decode_responses=False (redis-py types them loosely).
Rows = list[tuple[bytes, dict[bytes, bytes]]]

# One blocking read waits at most this long before the follower re-checks its state.
FOLLOW_BLOCK_MS = 5_000
# Records fetched per round trip when replaying or following.
READ_BATCH = 100


class SeqMismatch(Exception):
    """A conditional append found another tail: somebody else owns the log now."""

    def __init__(self, cast_id: str, expected: int, tail: int) -> None:
        super().__init__(f"cast {cast_id}: append expected tail {expected}, log is at {tail}")
        self.cast_id = cast_id
        self.expected = expected
        self.tail = tail


class CastStore:
    """One per process. Scripts are registered once; every method is one or few round trips."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._append = redis.register_script(scripts.APPEND)
        # Submits arrive many at a time on a busy intake: those of one loop turn share a round trip.
        self._submit = ScriptBatcher(redis, scripts.SUBMIT)
        self._submit_limited = ScriptBatcher(redis, scripts.SUBMIT_LIMITED)

    async def append(self, cast_id: str, match_seq_num: int, records: Sequence[Record]) -> int:
        """Append ``records`` at ``match_seq_num`` if the tail is exactly there; return the new tail.

        Raises :class:`SeqMismatch` (carrying the real tail) when it is not. Retry-safe: when
        the client resends an append whose reply was lost, the records already standing at
        ``match_seq_num`` are this very append's, and it answers as the first call would have.
        """
        if not records:
            raise ValueError("append needs at least one record")
        fields = [encode_fields(record) for record in records]
        args: list[bytes | int] = [match_seq_num]
        for triple in fields:
            args.extend(triple)
        ok, tail = await self._append(keys=[keys.cast_key(cast_id)], args=args)
        tail = int(tail)
        if not ok:
            if tail == match_seq_num + len(records) and await self._holds(cast_id, match_seq_num, fields):
                return tail
            raise SeqMismatch(cast_id, match_seq_num, tail)
        return tail

    async def _holds(self, cast_id: str, seq_num: int, fields: list[list[bytes]]) -> bool:
        """Whether the log holds exactly these encoded records from ``seq_num`` on.

        Every attempt opens with its own ``start`` (attempt number, time), so two writers never
        hold identical records at one position: a match can only be our own earlier write.
        """
        rows = cast(Rows, await self.redis.xrange(
            keys.cast_key(cast_id), min=keys.entry_id(seq_num), max=keys.entry_id(seq_num + len(fields) - 1)
        ))
        stored = [[f.get(b"e", b""), f.get(b"h", b""), f.get(b"b", b"")] for _, f in rows]
        return stored == fields

    async def submit(
        self,
        cast_id: str,
        text: str,
        voice: str,
        meta: Meta,
        *,
        limit: tuple[RateLimiter, str] | None = None,
    ) -> SubmitResult:
        """Claim the cast, write its recipe, ``meta`` and one job in one atomic step.

        With ``limit`` (a limiter and a client) the same step first takes the client's token;
        when the bucket has none it writes nothing else and :class:`RateLimited` is raised.
        """
        submit_keys = [keys.cast_key(cast_id), keys.catalog_key(cast_id), keys.JOBS]
        args: list[str | bytes | float | int] = [cast_id, voice, text, meta.title, encode_headers(meta)]
        if limit is None:
            return _submit_result(await self._submit(keys=submit_keys, args=args))
        limiter, client = limit
        ok, answer = await self._submit_limited(
            keys=[*submit_keys, limiter.key(client)], args=[*args, *limiter.args()]
        )
        if not ok:
            raise RateLimited(Verdict.of(ok, answer))
        return _submit_result(answer)

    async def recipe(self, cast_id: str) -> Recipe | None:
        return await read_recipe(self.redis, cast_id)

    async def tail(self, cast_id: str) -> int:
        """The next seq_num to be written: one past the last entry's id (an archived log keeps
        only its last entry, so XLEN is not the tail there)."""
        rows = cast(Rows, await self.redis.xrevrange(keys.cast_key(cast_id), count=1))
        return keys.seq_of(rows[0][0]) + 1 if rows else 0

    async def read(self, cast_id: str, seq_num: int = 0, limit: int = READ_BATCH) -> list[Entry]:
        """Up to ``limit`` records from ``seq_num`` on (records of unknown kinds are skipped)."""
        rows = cast(Rows, await self.redis.xrange(keys.cast_key(cast_id), min=keys.entry_id(seq_num), count=limit))
        return _decode_rows(rows)

    async def read_all(self, cast_id: str, batch: int = READ_BATCH) -> tuple[list[Entry], int]:
        """Every record of the log, and its tail: the next seq_num, counted from the stored ids
        themselves, so records of kinds this version skips still count."""
        entries: list[Entry] = []
        tail, after = 0, "-"
        while True:
            rows = cast(Rows, await self.redis.xrange(keys.cast_key(cast_id), min=after, count=batch))
            entries.extend(_decode_rows(rows))
            if rows:
                tail = keys.seq_of(rows[-1][0]) + 1
                after = keys.entry_id(tail)
            if len(rows) < batch:
                return entries, tail

    async def last(self, cast_id: str) -> Entry | None:
        rows = cast(Rows, await self.redis.xrevrange(keys.cast_key(cast_id), count=1))
        decoded = _decode_rows(rows)
        return decoded[0] if decoded else None

    async def follow(
        self,
        cast_id: str,
        seq_num: int = 0,
        *,
        block_ms: int = FOLLOW_BLOCK_MS,
        batch: int = READ_BATCH,
        stop_at_terminal: bool = True,
    ) -> AsyncIterator[Entry]:
        """Replay from ``seq_num`` then follow the live tail, ending after ``eos`` or ``error``.

        Replay and live use the same read keyed by the last seen entry id, so the hand-over
        has neither a gap nor a duplicate. The caller's own dedicated connection is advised:
        a blocking read holds its connection for up to ``block_ms``.
        """
        key = keys.cast_key(cast_id)
        if seq_num > 0 and stop_at_terminal:
            last = await self.last(cast_id)
            if last is not None and last.seq_num < seq_num and is_terminal(last.record):
                return  # seeking past the end of a finished log: nothing will ever come
        after: str | bytes = keys.entry_id(seq_num - 1) if seq_num > 0 else "0-0"
        while True:
            reply = cast("list[tuple[bytes, Rows]] | None", await self.redis.xread({key: after}, count=batch, block=block_ms))
            for _stream, rows in reply or ():
                for entry_id, fields in rows:
                    after = entry_id
                    entry = decode_entry(entry_id, fields)
                    if entry is None:
                        continue
                    yield entry
                    if stop_at_terminal and is_terminal(entry.record):
                        return


def _submit_result(answer: bytes | str) -> SubmitResult:
    return cast(SubmitResult, answer.decode() if isinstance(answer, bytes) else answer)


def _decode_rows(rows: Rows) -> list[Entry]:
    out = []
    for entry_id, fields in rows:
        entry = decode_entry(entry_id, fields)
        if entry is not None:
            out.append(entry)
    return out

