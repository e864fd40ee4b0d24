"""Calls of one Lua script made at the same moment, sent to Redis together.

A busy intake runs many submits at once, each one EVALSHA. Sent one by one, each pays a pool
checkout, a socket write, a wake-up on its reply and a release: on a small CPU that round-trip
machinery costs more than the script itself. ``ScriptBatcher`` gathers the calls made in one
turn of the event loop and sends them as one pipeline (one write, one read). Each call is still
its own script run, atomic on its own; a batch is not a transaction, and one call's error is
that call's alone. A call made with nothing else in flight goes alone, a loop turn later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

KeyT = str | bytes
ArgT = str | bytes | int | float

# The most calls one pipeline carries; more wait for the next batch, which goes out at once.
SCRIPT_BATCH_MAX = 64


class ScriptBatcher:
    """A drop-in for ``redis.register_script(source)``'s callable: ``await batcher(keys=, args=)``."""

    def __init__(self, redis: Redis, source: str, max_batch: int = SCRIPT_BATCH_MAX) -> None:
        if max_batch < 1:
            raise ValueError("a batch holds at least one call")
        self._script = redis.register_script(source)
        self._redis = redis
        self._max = max_batch
        self._queue: list[tuple[Sequence[KeyT], Sequence[ArgT], asyncio.Future[Any]]] = []
        self._sender: asyncio.Task[None] | None = None
        # What went out so far (metrics and tests): script calls, and the round trips they took.
        self.calls = 0
        self.round_trips = 0

    async def __call__(self, keys: Sequence[KeyT] = (), args: Sequence[ArgT] = ()) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((keys, args, future))
        if self._sender is None:
            # A task's first step runs on the next loop turn, after every caller of this turn
            # has queued its call. The task owns the sends: a caller cancelled meanwhile does
            # not cancel the others' calls.
            self._sender = asyncio.create_task(self._send_all())
        return await future

    async def _send_all(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[: self._max], self._queue[self._max :]
                await self._send(batch)
        finally:
            self._sender = None

    async def _send(self, batch: list[tuple[Sequence[KeyT], Sequence[ArgT], asyncio.Future[Any]]]) -> None:
        self.calls += len(batch)
        self.round_trips += 1
        if len(batch) == 1:
            keys, args, future = batch[0]
            await _settle(future, self._script(keys=keys, args=args))
            return
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for keys, args, _ in batch:
                    pipe.evalsha(self._script.sha, len(keys), *keys, *args)
                answers = await pipe.execute(raise_on_error=False)
        except Exception as exc:  # the connection failed: every call of the batch failed
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (keys, args, future), answer in zip(batch, answers):
            if isinstance(answer, NoScriptError):  # Redis restarted or SCRIPT FLUSH: load, run
                await _settle(future, self._script(keys=keys, args=args))
            elif future.done():
                continue  # its caller was cancelled; the script ran all the same
            elif isinstance(answer, Exception):
                future.set_exception(answer)
            else:
                future.set_result(answer)


async def _settle(future: asyncio.Future[Any], call: Any) -> None:
    try:
        answer = await call
    except Exception as exc:
        if not future.done():
            future.set_exception(exc)
    else:
        if not future.done():
            future.set_result(answer)
