"""Cancelling a cast: the text not yet spoken is dropped, the cast ends as cut short.

Whoever may cancel (intake: the live WebSocket's ``cancel``, ``POST /api/casts/{id}/cancel``)
calls :func:`cancel`; one script in the cast's lane sets the flag ``cancel/{lN}/<id>`` (read when
a job is admitted, so a cast still queued or taken over is cut too), then the id goes to
``cancels`` (another slot: its own step), which every worker follows with a blocking read to stop the cast it holds at the chunk in hand. The worker then
ends the log with ``eos`` marked ``cancelled``: the link replays what was spoken.
"""

from __future__ import annotations

from typing import Literal, cast

from redis.asyncio import Redis

from .keys import CANCELS, cancel_key, cast_key, decoded
from .lua import FIELD

# How long the flag stays: a job waits in the queue far less (a cast has ended by then).
CANCEL_TTL_S = 86_400
# Entries kept in `cancels` (approximately): workers read it as it grows, never its history.
CANCELS_MAXLEN = 1_000

# KEYS[1]: pub/casts/{lN}/<id>, KEYS[2]: cancel/{lN}/<id> (one lane)
# ARGV[1]: the flag's TTL (s)
# 'missing' (no log), 'ended' (its last record is eos or error), else set the flag, 'ok'.
CANCEL = (
    FIELD
    + """
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
if not last then return 'missing' end
local kind = field(last, 'e')
if kind == 'eos' or kind == 'error' then return 'ended' end
redis.call('SET', KEYS[2], '1', 'EX', ARGV[1])
return 'ok'
"""
)

CancelAnswer = Literal["ok", "missing", "ended"]


async def cancel(redis: Redis, cast_id: str) -> CancelAnswer:
    """Ask every worker to cut the cast short; 'ended' when it had ended anyway."""
    reply = await redis.eval(CANCEL, 2, cast_key(cast_id), cancel_key(cast_id),
                             CANCEL_TTL_S)  # type: ignore[misc]  # redis-py's eval is loosely typed
    answer = cast(CancelAnswer, decoded(reply))
    if answer == "ok":  # the flag stands first: a worker that misses the word still admits no job
        await redis.xadd(CANCELS, {"id": cast_id}, maxlen=CANCELS_MAXLEN, approximate=True)
    return answer


async def is_cancelled(redis: Redis, cast_id: str) -> bool:
    return bool(await redis.exists(cancel_key(cast_id)))

