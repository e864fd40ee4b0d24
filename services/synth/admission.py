"""Admission and recovery: jobs from the inboxes become active casts, or are settled at once.

The admitter takes jobs only while the admitted casts' demand leaves room within the model's
measured capacity (:mod:`synth.capacity`): first its own pending entries (a restart), then
retries whose backoff ran out, then entries of dead workers (XAUTOCLAIM after the lease), then
new ones; jobs begun elsewhere go on at once, up to ``SYNTH_MAX_ACTIVE``. Open casts come through their own inbox, up to ``SYNTH_MAX_LIVE``.

Admitting a job recovers its cast from its log (read through :class:`castlog.LogReader`) and
decides; what it writes for a job that begins no attempt is :class:`~synth.outcomes.Outcomes`': a
finished cast is acknowledged (its receipt published again when the job may have died before
it), an answered error acknowledged, a cast whose chunk in hand killed too many workers given up,
a malformed entry dead-lettered. Any other is planned from the log's true tail and begins its next
attempt with `start`.
"""

from __future__ import annotations

import asyncio
import logging

from redis.exceptions import RedisError

import castlog
from castlog import SeqMismatch, Start

from . import capacity, jobs
from .cast import ActiveCast, Assignment, plan
from .crew import Crew
from .hand import pause_after, quietly, wait
from .inbox import Delivery, Inbox
from .livefeed import read_open_text
from .outcomes import Outcomes

log = logging.getLogger(__name__)

# Appends of `start` tried again when only the queue clerk's notes moved the tail meanwhile.
NOTE_RETRIES = 3


class Admitter:
    """Two loops (whole-text jobs, open casts) that fill :class:`Hand` with casts; a job they
    cannot begin leaves through :class:`Outcomes`."""

    def __init__(self, crew: Crew, outcomes: Outcomes, voices: frozenset[str]) -> None:
        self.crew, self.outcomes, self.voices = crew, outcomes, voices

    # ---- the loops --------------------------------------------------------------------------

    async def run(self) -> None:
        cfg, hand, inbox = self.crew.cfg, self.crew.hand, self.crew.hand.inbox
        while not hand.stopping:
            try:
                room = self.openings()
                if room == 0:  # jobs begun elsewhere go on at once, up to the hard bound
                    begun = await inbox.take_begun(cfg.max_active - len(hand.casts), hand.active(inbox))
                    await self._admit_all(begun, inbox)
                    if not begun:
                        await wait(hand.room, cfg.poll_s)
                    continue
                batch = await inbox.take(room, hand.active(inbox))
                hand.admitting = len(batch)
                for delivery in batch:
                    try:
                        await self._admit_all([delivery], inbox)  # one at a time: see Hand.admitting
                    finally:
                        hand.admitting -= 1
                        hand.work.set()
            except RedisError as exc:
                hand.admitting = 0
                if await pause_after(exc, f"admitter of {inbox.stream}"):
                    await quietly(inbox.group.create())

    def openings(self) -> int:
        """How many whole-text jobs may be taken now: as many as the admitted demand leaves room
        for within the measured capacity (re-checked each round, never beyond ``SYNTH_MAX_ACTIVE``)."""
        crew, cfg, casts = self.crew, self.crew.cfg, self.crew.hand.casts
        needs = capacity.needs_of(casts.values(), crew.speed, crew.clock())
        free = cfg.max_active - sum(1 for c in casts.values() if not c.live)
        known = capacity.known_capacity(crew.speed, cfg.capacity_measure_s)
        return max(0, min(free, capacity.room(needs, known, cfg.admit_headroom)))

    async def run_live(self) -> None:
        """Open casts: admitted while fewer than SYNTH_MAX_LIVE of those held have something to
        say (an open cast waiting for text holds no place: one client's idle casts never keep
        another's from its first audio) and fewer than SYNTH_MAX_LIVE_HELD are held at all."""
        cfg, hand, inbox = self.crew.cfg, self.crew.hand, self.crew.hand.live_inbox
        while not hand.stopping:
            try:
                live = [c for c in hand.casts.values() if c.live]
                room = min(cfg.max_live - sum(1 for c in live if c.speaking), cfg.max_live_held - len(live))
                if room <= 0:
                    await wait(hand.room, cfg.poll_s)
                    continue
                await self._admit_all(await inbox.take(room, hand.active(inbox)), inbox)
            except RedisError as exc:
                if await pause_after(exc, f"admitter of {inbox.stream}"):
                    await quietly(inbox.group.create())

    async def _admit_all(self, deliveries: list[Delivery], inbox: Inbox) -> None:
        for delivery in deliveries:
            if self.crew.hand.stopping:  # taken but not begun: back to the group with the rest
                inbox.retry_later(delivery.entry_id, 0)
                continue
            try:
                await self._admit_delivery(delivery, inbox)
            except RedisError as exc:  # still pending with us: try it again soon, uncounted
                log.warning("job %s: Redis error while admitting (%s); retrying", delivery.entry_id, exc)
                self.outcomes.retry_soon(delivery.entry_id, inbox)

    async def _admit_delivery(self, delivery: Delivery, inbox: Inbox) -> None:
        entry_id, fields, deliveries = delivery.entry_id, delivery.fields, delivery.deliveries
        if deliveries is None:
            info = (await jobs.pending(self.crew.redis, [entry_id], inbox.stream)).get(entry_id)
            if info is None or info.consumer != self.crew.cfg.consumer:
                return  # acknowledged or taken over meanwhile: not ours to run
            deliveries = info.deliveries
        job = jobs.parse_job(entry_id, fields, deliveries, inbox.stream)
        if job is None:
            await self.outcomes.malformed(entry_id, fields, deliveries, inbox.stream)
            return
        await self.admit(job)

    # ---- one job ----------------------------------------------------------------------------

    async def admit(self, job: Assignment) -> None:
        """Read the cast's log and recipe and start the next attempt, or settle the job at once."""
        if job.key in self.crew.hand.casts:
            return  # already ours and running
        if any(c.cast_id == job.cast_id for c in self.crew.hand.casts.values()):
            # A second job for a cast we are making: its first job stays pending until `eos`,
            # so this one adds nothing (and a second `start` would restart our own attempt).
            await self.outcomes.answered(job, "it duplicates an active cast")
            return
        entries, tail = await self.crew.reader.read_all(job.cast_id)
        if not await self._settled(job, entries):
            await self._recover(job, entries, tail)

    async def _settled(self, job: Assignment, entries: list[castlog.Entry]) -> bool:
        """Whether the job was settled at once, its cast's log answering it (or there being none).
        The clerk's `queue` notes answer nothing: the record before them decides."""
        last = next((e for e in reversed(entries) if e.kind != "queue"), None)
        if last is None:
            await self.outcomes.give_up(job, None, "the cast has no log (was it deleted?)", job.deliveries)
        elif last.kind == "eos":
            await self.outcomes.finished_earlier(job, entries)
        elif last.kind == "error" and last.ts > job.enqueued_at:
            await self.outcomes.answered(job, "the error its cast ends in answered it (we died before the XACK)")
        else:
            return False
        return True

    async def _recover(self, job: Assignment, entries: list[castlog.Entry], tail: int) -> None:
        """Plan the next attempt from the log and begin it, or give the job up."""
        crew, cfg = self.crew, self.crew.cfg
        state = castlog.summarize(entries)
        tally = await jobs.tally(crew.redis, job.entry_id)
        own_retry = job.entry_id in crew.hand.requeued
        crew.hand.requeued.discard(job.entry_id)
        if tally.hand >= state.next_sentence() and not own_retry:  # a worker died with that chunk in hand
            crashes = await jobs.count_death(crew.redis, job.entry_id, tally)
            if crashes >= cfg.max_crashes_per_chunk:
                reason = f"sentence {tally.hand} was in hand when {crashes} workers died (SYNTH_MAX_CRASHES_PER_CHUNK)"
                await self.outcomes.give_up(job, tail, reason, state.attempts)
                return
        recipe = await castlog.read_recipe(crew.redis, job.cast_id)
        if recipe is None:
            await self.outcomes.give_up(job, tail, "the cast's recipe is missing from the catalog", job.deliveries)
            return
        open_text = await read_open_text(crew.live, job.cast_id, crew.clock()) if job.live else None
        args = (job, recipe.voice, recipe.text, entries, state, tail, open_text, tally.failures)
        # A whole text is split here: linear, but tens of milliseconds for the longest, which the
        # loop (every other cast's audio) must not wait on. An open cast's text is split already.
        cast = plan(*args) if open_text is not None else await asyncio.to_thread(plan, *args)
        if not castlog.voice_available(recipe.voice, self.voices):
            known = ", ".join(sorted(self.voices))
            await self.outcomes.give_up(job, tail, f"unknown voice {recipe.voice!r}: this worker has {known}", cast.attempt)
        elif cast.job_attempt > cfg.max_attempts:  # failed for good; the answer was lost
            await self.outcomes.give_up(job, tail, f"gave up after {tally.failures} failed attempts", cast.attempt - 1)
        else:
            if await castlog.is_cancelled(crew.redis, job.cast_id):  # cancelled while queued or taken over
                cast.cancel()
            await self._begin(cast)

    async def _begin(self, cast: ActiveCast) -> None:
        """`start` the attempt in the log, then hold the cast (or finish it: only `eos` was missing)."""
        job = cast.job
        start = Start(attempt=cast.attempt, resume_from=cast.resume_from, at=castlog.now_ms())
        for _ in range(NOTE_RETRIES):
            try:
                cast.tail = await self.crew.store.append(job.cast_id, cast.tail, [start])
                break
            except SeqMismatch as exc:
                moved = await self.crew.reader.read(job.cast_id, cast.tail)
                if not moved or any(e.kind != "queue" for e in moved):
                    log.warning("cast %s moved while admitting (%s): another worker owns it", job.cast_id, exc)
                    return
                cast.tail = moved[-1].seq_num + 1  # only the clerk's `queue` notes came: start after them
        else:
            log.warning("cast %s: the queue clerk kept noting it while admitting; retrying later", job.cast_id)
            self.outcomes.retry_soon(job.entry_id, self.crew.hand.inbox_of(job))
            return
        self.crew.metrics.attempts.inc()
        log.info(
            "cast %s: attempt %d from sentence %d of %d (job %s)",
            job.cast_id, cast.attempt, cast.resume_from, len(cast.chunks), job.entry_id,
        )
        if cast.complete:  # every sentence was already in the log: only `eos` is missing
            await self.outcomes.finish(cast)
            return
        cast.pace = cast.pace.admitted(self.crew.clock())
        self.crew.hand.add(cast)  # an open cast wakes the live feed too (Hand.opened)
