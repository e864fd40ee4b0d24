"""Admission and recovery: jobs from the inboxes become active casts, or are settled at once.

The admitter takes jobs only while the schedule has room (:func:`scheduler.admissible`): first
its own pending entries (a restart), then retries whose backoff ran out, then entries of dead
workers (XAUTOCLAIM after the lease), then new ones; jobs begun elsewhere go on at once, up to
``SYNTH_MAX_ACTIVE``. Open casts come through their own inbox, up to ``SYNTH_MAX_LIVE``.

Admitting a job recovers its cast from its log (read through :class:`castlog.LogReader`): a
finished cast is acknowledged (its receipt published again when the job may have died before
it), an answered error acknowledged, a cast whose chunk in hand killed too many workers given
up; any other is planned from the log's true tail and begins its next attempt with `start`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from redis.asyncio import Redis
from redis.exceptions import RedisError

import castlog
from castlog import CastStore, LogReader, SeqMismatch, Start

from . import jobs, scheduler
from .cast import ActiveCast, Assignment, plan
from .config import SynthConfig
from .holdings import REDIS_RETRY_S, Holdings, quietly, wait
from .inbox import Delivery, Inbox
from .livefeed import LiveFeed, read_open_text
from .metrics import SynthMetrics
from .outcomes import Outcomes
from .scheduler import Admitted

log = logging.getLogger(__name__)


class Admitter:
    """Two loops (whole-text jobs, open casts) that fill :class:`Holdings` with casts."""

    def __init__(
        self,
        cfg: SynthConfig,
        redis: Redis,
        store: CastStore,
        reader: LogReader,
        held: Holdings,
        outcomes: Outcomes,
        feed: LiveFeed,
        voices: frozenset[str],
        metrics: SynthMetrics,
        clock: Callable[[], float],
        speed: scheduler.ModelSpeed | None = None,
    ) -> None:
        self.cfg, self.redis, self.store, self.reader = cfg, redis, store, reader
        self.speed = speed or scheduler.ModelSpeed()  # the dispatcher's: whether a first sentence goes whole
        self.held, self.outcomes, self.feed = held, outcomes, feed
        self.voices = voices
        self.metrics = metrics
        self._clock = clock

    # ---- the loops --------------------------------------------------------------------------

    async def run(self) -> None:
        held, inbox = self.held, self.held.inbox
        while not held.stopping:
            try:
                room = scheduler.admissible(
                    [c.view() for c in held.casts.values() if not c.live],
                    self._clock(),
                    cap=self.cfg.concurrency,
                    max_active=self.cfg.max_active,
                    threshold_s=self.cfg.lead_threshold_s,
                )
                if room == 0:  # jobs begun elsewhere go on at once, up to the hard bound
                    begun = await inbox.take_begun(self.cfg.max_active - len(held.casts), held.active(inbox))
                    await self._admit_all(begun, inbox)
                    if not begun:
                        await wait(held.room, self.cfg.poll_s)
                    continue
                batch = await inbox.take(room, held.active(inbox))
                held.admitting = len(batch)
                for delivery in batch:
                    try:
                        await self._admit_all([delivery], inbox)  # one at a time: see Holdings.admitting
                    finally:
                        held.admitting -= 1
                        held.work.set()
            except RedisError as exc:
                held.admitting = 0
                log.warning("admitter: Redis error (%s); retrying in %.1fs", exc, REDIS_RETRY_S)
                await asyncio.sleep(REDIS_RETRY_S)
                if "NOGROUP" in str(exc):  # Redis lost its data (a restart without persistence)
                    await quietly(jobs.ensure_group(self.redis))

    async def run_live(self) -> None:
        """Open casts: admitted while fewer than SYNTH_MAX_LIVE are held, whatever the others do."""
        held, inbox = self.held, self.held.live_inbox
        while not held.stopping:
            try:
                room = self.cfg.max_live - sum(1 for c in held.casts.values() if c.live)
                if room <= 0:
                    await wait(held.room, self.cfg.poll_s)
                    continue
                await self._admit_all(await inbox.take(room, held.active(inbox)), inbox)
            except RedisError as exc:
                log.warning("live admitter: Redis error (%s); retrying in %.1fs", exc, REDIS_RETRY_S)
                await asyncio.sleep(REDIS_RETRY_S)
                if "NOGROUP" in str(exc):
                    await quietly(jobs.ensure_group(self.redis, castlog.JOBS_LIVE))

    async def _admit_all(self, deliveries: list[Delivery], inbox: Inbox) -> None:
        for delivery in deliveries:
            if self.held.stopping:  # taken but not begun: back to the group with the rest
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
            info = (await jobs.pending(self.redis, [entry_id], inbox.stream)).get(entry_id)
            if info is None or info.consumer != self.cfg.consumer:
                return  # acknowledged or taken over meanwhile: not ours to run
            deliveries = info.deliveries
        job = jobs.parse_job(entry_id, fields, deliveries, inbox.stream)
        if job is None:
            log.warning("job %s is malformed (%r); moving it to %s", entry_id, fields, castlog.JOBS_DEAD)
            cast_id = jobs.as_str(fields.get(b"id", b"?"))[:64]
            await castlog.dead_letter(self.redis, cast_id, deliveries, "malformed job entry", self.cfg.consumer)
            self.metrics.dead_letters.inc()
            await jobs.ack(self.redis, entry_id, inbox.stream)
            return
        await self.admit(job)

    # ---- one job ----------------------------------------------------------------------------

    async def admit(self, job: Assignment) -> None:
        """Read the cast's log and recipe and start the next attempt, or settle the job at once."""
        if job.key in self.held.casts:
            return  # already ours and running
        if any(c.cast_id == job.cast_id for c in self.held.casts.values()):
            # A second job for a cast we are making: its first job stays pending until `eos`,
            # so this one adds nothing (and a second `start` would restart our own attempt).
            log.info("job %s duplicates active cast %s; acknowledging it", job.entry_id, job.cast_id)
            await jobs.ack(self.redis, job.entry_id, job.stream)
            return
        entries, tail = await self.reader.read_all(job.cast_id)
        if await self._settled(job, entries):
            return
        cast = await self._recover(job, entries, tail)
        if cast is not None:
            await self._begin(cast)

    async def _settled(self, job: Assignment, entries: list[castlog.Entry]) -> bool:
        """Settle the job at once when its cast's log already answers it (or there is no log)."""
        last = entries[-1] if entries else None
        if last is None:
            await self.outcomes.give_up(job, None, "the cast has no log (was it deleted?)", job.deliveries)
            return True
        if last.kind == "eos":
            log.info("cast %s is already finished; acknowledging job %s", job.cast_id, job.entry_id)
            if job.deliveries > 1:  # this job may have written that eos and died before its receipt
                await self.outcomes.publish_receipt(job, entries)
            await jobs.ack(self.redis, job.entry_id, job.stream)
            return True
        if last.kind == "error" and last.ts > job.enqueued_at:
            # This job was already answered with that error (we died before the XACK).
            await jobs.ack(self.redis, job.entry_id, job.stream)
            return True
        return False

    async def _recover(self, job: Assignment, entries: list[castlog.Entry], tail: int) -> ActiveCast | None:
        """Plan the next attempt from the log, or give the job up (None)."""
        state = castlog.summarize(entries)
        tally = await jobs.tally(self.redis, job.entry_id)
        own_retry = job.entry_id in self.held.requeued
        self.held.requeued.discard(job.entry_id)
        if tally.hand >= state.next_sentence() and not own_retry:  # a worker died with that chunk in hand
            crashes = await jobs.count_death(self.redis, job.entry_id, tally)
            if crashes >= self.cfg.max_crashes_per_chunk:
                reason = f"sentence {tally.hand} was in hand when {crashes} workers died (SYNTH_MAX_CRASHES_PER_CHUNK)"
                await self.outcomes.give_up(job, tail, reason, state.attempts)
                return None
        recipe = await self.store.recipe(job.cast_id)
        if recipe is None:
            await self.outcomes.give_up(job, tail, "the cast's recipe is missing from the catalog", job.deliveries)
            return None
        open_text = await read_open_text(self.feed.store, job.cast_id, self._clock()) if job.live else None
        whole = self.speed.whole_first_chars(self.cfg.first_audio_target_s)
        cast = plan(job, recipe.voice, recipe.text, entries, state, tail, open_text, tally.failures, whole)
        if recipe.voice not in self.voices:
            known = ", ".join(sorted(self.voices))
            reason = f"unknown voice {recipe.voice!r}: this worker has {known}"
            await self.outcomes.give_up(job, tail, reason, cast.attempt)
            return None
        if cast.job_attempt > self.cfg.max_attempts:  # failed for good; the answer was lost
            await self.outcomes.give_up(job, tail, f"gave up after {tally.failures} failed attempts", cast.attempt - 1)
            return None
        return cast

    async def _begin(self, cast: ActiveCast) -> None:
        """`start` the attempt in the log, then hold the cast (or finish it: only `eos` was missing)."""
        job = cast.job
        start = Start(attempt=cast.attempt, resume_from=cast.resume_from, at=jobs.now_ms())
        try:
            cast.tail = await self.store.append(job.cast_id, cast.tail, [start])
        except SeqMismatch as exc:
            log.warning("cast %s moved while admitting (%s): another worker owns it", job.cast_id, exc)
            return
        self.metrics.attempts.inc()
        log.info(
            "cast %s: attempt %d from sentence %d of %d (job %s)",
            job.cast_id, cast.attempt, cast.resume_from, len(cast.chunks), job.entry_id,
        )
        if cast.complete:  # every sentence was already in the log: only `eos` is missing
            await self.outcomes.finish(cast)
            return
        cast.note(Admitted(), self._clock())
        self.held.add(cast)
        if cast.live:
            self.feed.changed()
