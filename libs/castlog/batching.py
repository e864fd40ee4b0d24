"""Calls of one Lua script made at the same moment, sent to Redis together.

A busy intake runs many submits at once, each one EVALSHA. Sent one by one, each pays a pool
checkout, a socket write, a wake-up on its reply and a release: on a small CPU that round-trip
machinery costs more than the script itself. ``ScriptBatcher`` gathers the calls made in one
turn of the event loop and sends them as one pipeline (one write, one read). Each call is still
its own script run, atomic on its own; a batch is not a transaction, and one call's error is
that call's alone. A call made with nothing else in flight goes alone, a loop turn later.

With ``replicas`` > 0 the pipeline ends with ``WAIT replicas wait_ms`` on the same connection
(one per node in a cluster: a cluster pipeline sends each node's commands on one connection),
so a call is answered only once its writes reached that many replicas; otherwise it raises
:class:`NotReplicated` carrying the script's answer (the write stands: a retry is idempotent).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import NoScriptError, RedisError

KeyT = str | bytes
ArgT = str | bytes | int | float

# The most calls one pipeline carries; more wait for the next batch, which goes out at once.
SCRIPT_BATCH_MAX = 64


class NotReplicated(Exception):
    """The script ran, but WAIT saw fewer replicas than asked within its timeout."""

    def __init__(self, answer: Any, replicas: int, wanted: int) -> None:
        super().__init__(f"the write reached {replicas} of {wanted} replica(s) in time")
        self.answer, self.replicas, self.wanted = answer, replicas, wanted


class ScriptBatcher:
    """A drop-in for ``redis.register_script(source)``'s callable: ``await batcher(keys=, args=)``."""

    def __init__(
        self, redis: Redis, source: str, max_batch: int = SCRIPT_BATCH_MAX, *, replicas: int = 0, wait_ms: int = 0
    ) -> None:
        if max_batch < 1:
            raise ValueError("a batch holds at least one call")
        self.replicas, self.wait_ms = replicas, wait_ms
        self._script = redis.register_script(source)
        self._source = source
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
                try:
                    await self._send(batch)
                except Exception as exc:  # whatever went wrong, its callers hear it: none waits forever
                    for _, _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
        finally:
            self._sender = None

    async def _send(self, batch: list[tuple[Sequence[KeyT], Sequence[ArgT], asyncio.Future[Any]]]) -> None:
        self.calls += len(batch)
        self.round_trips += 1
        if len(batch) == 1 and not self.replicas:
            keys, args, future = batch[0]
            await _settle(future, self._script(keys=keys, args=args))
            return
        # the connection failing fails every call of the batch (_send_all tells their callers)
        async with self._redis.pipeline(transaction=False) as pipe:
            for keys, args, _ in batch:
                # (by name: redis-py blocks the evalsha method in a cluster pipeline, for
                # scripts whose keys span slots; ours are one lane each)
                pipe.execute_command("EVALSHA", self._script.sha, len(keys), *keys, *args)
            waits = self._waits(pipe, batch)
            answers = await pipe.execute(raise_on_error=False)
        acked = self._acked(len(batch), waits, answers[len(batch) :])
        for (keys, args, future), answer, reached in zip(batch, answers, acked):
            if isinstance(answer, NoScriptError):  # Redis restarted or SCRIPT FLUSH: load, run
                await self._again(keys, args, future)
            elif not future.done() and not isinstance(answer, Exception) and reached < self.replicas:
                future.set_exception(NotReplicated(answer, reached, self.replicas))
            elif future.done():
                continue  # its caller was cancelled; the script ran all the same
            elif isinstance(answer, Exception):
                future.set_exception(answer)
            else:
                future.set_result(answer)


    def _waits(self, pipe: Any, batch: list[tuple[Sequence[KeyT], Sequence[ArgT], asyncio.Future[Any]]]) -> list[Any]:
        """Queue one WAIT per node the batch wrote to (one on a single Redis); each call's node
        (its name; None on a single Redis), found once, in the batch's order."""
        if not self.replicas:
            return []
        if not isinstance(self._redis, RedisCluster):
            pipe.execute_command("WAIT", self.replicas, self.wait_ms)
            return [None] * len(batch)
        nodes = [self._redis.get_node_from_key(keys[0]) for keys, _, _ in batch]
        if any(node is None for node in nodes):  # (raised before the send: every call fails)
            raise RedisError("no node serves a call's slot (the cluster is re-forming)")
        for node in {node.name: node for node in nodes}.values():
            pipe.execute_command("WAIT", self.replicas, self.wait_ms, target_nodes=node)
        return [node.name for node in nodes]

    def _acked(self, size: int, homes: list[Any], replies: list[Any]) -> list[int]:
        """Per call, the replicas its node's WAIT reported (0 each when none was asked)."""
        if not homes:
            return [0] * size
        # the WAITs went out one per node, in the order the nodes first came in the batch
        reached = {home: r if isinstance(r, int) else 0 for home, r in zip(dict.fromkeys(homes), replies)}
        return [reached[home] for home in homes]

    async def _again(self, keys: Sequence[KeyT], args: Sequence[ArgT], future: asyncio.Future[Any]) -> None:
        """A call whose script the server did not know: load it, then run it (and its WAIT) again."""
        if not self.replicas:
            await _settle(future, self._script(keys=keys, args=args))
            return
        try:
            await self._redis.script_load(self._source)
            await self._send([(keys, args, future)])
        except Exception as exc:  # this call's alone: the batch's others have their answers
            if not future.done():
                future.set_exception(exc)


async def _settle(future: asyncio.Future[Any], call: Any) -> None:
    try:
        answer = await call
    except Exception as exc:
        if not future.done():
            future.set_exception(exc)
    else:
        if not future.done():
            future.set_result(answer)
