"""What a worker hears on ``cancels`` (castlog.cancels), read as a test reads it: synth follows
that stream with its other broadcasts (synth/broadcasts.py), never through this."""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from castlog.keys import CANCELS, Rows, decoded


async def read_cancels(redis: Redis, after: str, block_ms: int, count: int) -> tuple[str, list[str]]:
    """The cast ids cancelled after entry ``after`` (waiting up to ``block_ms``), and the new ``after``."""
    reply = cast("list[tuple[bytes, Rows]]", await redis.xread({CANCELS: after}, count=count, block=block_ms))
    ids: list[str] = []
    for _, rows in reply or ():
        for entry_id, fields in rows:
            after = decoded(entry_id)
            ids.append(decoded(fields.get(b"id", b"")))
    return after, ids
