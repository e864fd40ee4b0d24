"""The worker's open casts: their text read from the catalog as it grows, cut into chunks.

The worker's one stream loop (``broadcasts.stream_loop``: one blocked XREAD, one per slot on a
cluster) follows the catalogs of every open cast this worker holds beside ``cancels`` and
``deletes``; a newly admitted cast wakes that read (``Hand.opened``) so that the next one names its
catalog.
Here each new fragment goes to its cast's chunker, and the synth loop is woken when a sentence is
complete. An open cast waiting for text wants no chunk, so it holds up nobody and spends no
attempt. One left without text for ``SYNTH_LIVE_IDLE_S`` is closed here (its rest is spoken, then
`eos`), so an abandoned cast still ends; while the worker is full, one that has had no text at all
is closed after ``SYNTH_LIVE_EMPTY_S``. The loop's read returns at least every SYNTH_POLL_S, and
the idle casts are looked at after each.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from castlog import LiveStore, TextEvent, catalog_key, content_id
from castlog.keys import Rows
from castlog.live import text_events
from fanout import Subscriber

from .broadcasts import BATCH
from .cast import ActiveCast, OpenText
from .crew import Crew
from .outcomes import Outcomes

log = logging.getLogger(__name__)


async def read_open_text(live: LiveStore, cast_id: str, now: float) -> OpenText | None:
    """The open cast's text so far, replayed through a fresh chunker (the same chunks as any
    earlier attempt cut from it); None when the catalog holds no open cast."""
    text = await live.read_text(cast_id)
    if text is None:
        return None
    state = OpenText(heard_at=now, speed=text.speed, client=text.client)
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
            new += state.add(state.chunker.feed(event.text))
        else:  # flush, or closed: what is buffered is spoken now
            new += state.add(state.chunker.flush())
            state.closed = event.kind == "closed"
    return new


class LiveFeed(Subscriber):
    """Follows the catalogs of the open casts in hand; a close that completes a cast (everything
    already appended) finishes it through ``outcomes``."""

    count = BATCH

    def __init__(self, crew: Crew, outcomes: Outcomes) -> None:
        self.crew, self.outcomes = crew, outcomes
        self.following: dict[str, ActiveCast] = {}  # catalog key -> cast, as the read in flight names them

    async def streams(self) -> dict[str, str]:
        self.following = {
            catalog_key(c.cast_id): c for c in self.crew.hand.casts.values()
            if c.open_text is not None and not c.open_text.closed and not c.closed
        }
        return {key: c.open_text.after for key, c in self.following.items() if c.open_text is not None}

    async def take(self, got: dict[str, Rows], idle: list[str]) -> None:
        """Each catalog's new text to its cast; then, whatever the read brought, the idle casts' close."""
        for key, rows in got.items():
            target = self.following.get(key)
            if target is not None and target.open_text is not None and not target.closed:
                if apply(target.open_text, text_events(rows), self.crew.clock()):
                    self.crew.hand.work.set()  # new chunks: wake the synth loop
                if target.complete:  # a close that completes the cast finishes it here
                    await self.outcomes.finish(target)
        await self._close_idle(self.following.values(), self.crew.clock())

    async def _close_idle(self, casts: Iterable[ActiveCast], now: float) -> None:
        cfg = self.crew.cfg
        full = sum(1 for c in self.crew.hand.casts.values() if c.live) >= cfg.max_live_held
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
