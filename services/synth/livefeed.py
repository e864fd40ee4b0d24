"""The worker's open casts: their text read from the catalog as it grows, cut into chunks.

One task follows the catalogs of every open cast this worker holds with one blocking XREAD on a
connection of its own (re-issued when the set of casts changes: a newly admitted cast ends the
read with CLIENT UNBLOCK, ``castlog.BlockingRead``, so the connection stays), feeds each new fragment to the cast's chunker and
wakes the synth loop when a sentence is complete. An open cast waiting for text wants no chunk,
so it holds up nobody and spends no attempt. One left without text for ``SYNTH_LIVE_IDLE_S`` is
closed here (its rest is spoken, then `eos`), so an abandoned cast still ends; while the worker is
full, one that has had no text at all is closed after ``SYNTH_LIVE_EMPTY_S``.

On a Redis Cluster a read's keys must share a slot, and the catalogs lie in their casts' lanes
(castlog/keys.py): there the feed sends one short XREAD per lane at once (``LANE_BLOCK_MS``), so a
lane's text never waits behind another lane's block, and no wake-up is needed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any, cast

from redis.exceptions import RedisError

from castlog import BlockingRead, LiveStore, TextEvent, catalog_key, content_id
from castlog.keys import lane_of_key
from castlog.live import text_events
from servicekit.connect import is_cluster

from .cast import ActiveCast, OpenText
from .crew import Crew
from .livechunks import LiveChunks
from .outcomes import Outcomes

log = logging.getLogger(__name__)

# Entries read from one catalog per round trip.
FEED_BATCH = 256
# On a cluster each lane's catalogs are read apart, at once; each read blocks this long at most.
LANE_BLOCK_MS = 50


async def read_open_text(live: LiveStore, cast_id: str, now: float) -> OpenText | None:
    """The open cast's text so far, replayed through a fresh chunker (the same chunks as any
    earlier attempt cut from it); None when the catalog holds no open cast."""
    text = await live.read_text(cast_id)
    if text is None:
        return None
    state = OpenText(chunker=LiveChunks(), heard_at=now, speed=text.speed, client=text.client)
    apply(state, text.events, now)
    return state


def apply(state: OpenText, events: Iterable[TextEvent], now: float) -> int:
    """Feed ``events`` to the cast's chunker; returns how many chunks became complete."""
    new = 0
    for event in events:
        state.after = event.entry_id
        if state.closed:
            continue  # nothing follows a close
        state.end = event.end
        state.heard_at = now
        if event.kind == "text":
            state.parts.append(event.text)  # not +=: a long text of small fragments stays linear
            new += len(state.chunker.feed(event.text))
        else:  # flush, or closed: what is buffered is spoken now
            new += len(state.chunker.flush())
            state.closed = event.kind == "closed"
    return new


class LiveFeed:
    """Follows the catalogs of the open casts in hand; a close that completes a cast (everything
    already appended) finishes it through ``outcomes``."""

    def __init__(self, crew: Crew, outcomes: Outcomes) -> None:
        self.crew, self.outcomes = crew, outcomes

    def _open(self) -> dict[str, ActiveCast]:
        return {
            catalog_key(c.cast_id): c for c in self.crew.held.casts.values()
            if c.open_text is not None and not c.open_text.closed and not c.closed
        }

    async def run(self) -> None:
        if is_cluster(self.crew.redis):
            await self._run(None)
            return
        conn = self.crew.redis.client()  # one pooled connection held for the blocking read
        try:
            await self._run(BlockingRead(conn, self.crew.redis))
        finally:
            await conn.aclose()  # back to the pool

    async def _run(self, blocking: BlockingRead | None) -> None:
        while True:
            try:
                await self._step(blocking)
            except RedisError as exc:
                log.warning("live feed: Redis error (%s); retrying", exc)
                await asyncio.sleep(self.crew.cfg.poll_s)

    async def _step(self, blocking: BlockingRead | None) -> None:
        crew, opened = self.crew, self.crew.held.opened  # set when an open cast is admitted
        following = self._open()
        opened.clear()
        if not following:
            await _wait(opened, crew.cfg.poll_s)
            return
        streams: dict[Any, Any] = {key: c.open_text.after for key, c in following.items() if c.open_text is not None}
        block_ms = max(1, int(crew.cfg.poll_s * 1000))
        if blocking is None:
            reply = await _lane_reads(crew, streams, min(block_ms, LANE_BLOCK_MS))
        else:
            changed = asyncio.ensure_future(opened.wait())  # re-issue the read with its catalog in it
            try:
                reply = await blocking.xread(streams, count=FEED_BATCH, block_ms=block_ms, wake=changed)
            finally:
                changed.cancel()
        now = crew.clock()
        for stream, rows in cast(Any, reply) or ():
            key = stream.decode() if isinstance(stream, bytes) else stream
            target = following.get(key)
            if target is not None and target.open_text is not None and not target.closed:
                new = apply(target.open_text, text_events(rows), now)
                await self._text_came(target, new)
        await self._close_idle(following.values(), now)

    async def _text_came(self, cast: ActiveCast, new_chunks: int) -> None:
        """Wake the synth loop for new chunks; a close that completes the cast finishes it here."""
        if new_chunks:
            self.crew.held.work.set()
        if cast.complete and not cast.closed:
            await self.outcomes.finish(cast)

    async def _close_idle(self, casts: Iterable[ActiveCast], now: float) -> None:
        cfg = self.crew.cfg
        full = sum(1 for c in self.crew.held.casts.values() if c.live) >= cfg.max_live_held
        for c in casts:
            state = c.open_text
            if state is None or state.closed:
                continue
            # a full worker's empty casts (never any text) get SYNTH_LIVE_EMPTY_S: places go to those who speak
            limit = min(cfg.live_empty_s, cfg.live_idle_s) if full and not state.end else cfg.live_idle_s
            if now - state.heard_at < limit:
                continue
            log.info("cast %s: no text for %.0fs; closing it", c.cast_id, now - state.heard_at)
            await self.crew.live.close(c.cast_id, state.end, content_id(state.text, c.voice, key=self.crew.live.content_key))
            state.heard_at = now  # 'moved': text came meanwhile, and the next read brings it


async def _lane_reads(crew: Crew, streams: dict[Any, Any], block_ms: int) -> list[Any]:
    """A cluster's read: the catalogs grouped by lane, one XREAD per lane, all at once."""
    lanes: dict[int | None, dict[Any, Any]] = {}
    for key, after in streams.items():
        lanes.setdefault(lane_of_key(key), {})[key] = after
    replies = await asyncio.gather(*(
        crew.redis.xread(group, count=FEED_BATCH, block=block_ms) for group in lanes.values()
    ))
    return [pair for reply in replies for pair in (reply.items() if isinstance(reply, dict) else reply or ())]


async def _wait(event: asyncio.Event, timeout_s: float) -> None:
    try:
        await asyncio.wait_for(event.wait(), timeout_s)
    except asyncio.TimeoutError:
        pass
