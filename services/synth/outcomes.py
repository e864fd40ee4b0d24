"""How an attempt at a cast ends, and what the worker writes for each ending.

- *finished*: `eos`, then the receipt on ``progress/done``, then XACK (a crash in between repeats
  only the idempotent rest); a job that finds its cast finished earlier republishes the receipt;
- *failed* in the model or encoder: counted in the job's tally, then retried after a backoff
  (the job stays pending) or given up for good: `error` (when the cast has a log), an entry in
  ``jobs/dead``, XACK;
- *requeued* after a Redis error, which is not the cast's fault: dropped and admitted again
  soon, nothing counted;
- *lost* to another worker (a conditional append found another tail): dropped, its job left
  unacknowledged for that worker.
"""

from __future__ import annotations

import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

import castlog
from castlog import CastStore, Eos, Error, LogReader, SeqMismatch

from . import jobs
from .cast import ActiveCast, Assignment
from .config import SynthConfig
from .holdings import REDIS_RETRY_S, Holdings
from .inbox import Inbox
from .metrics import SynthMetrics

log = logging.getLogger(__name__)

# Longest error text kept in `error` records and `jobs/dead` entries.
MAX_REASON_CHARS = 500


class Outcomes:
    """Settles the casts of one worker: every ending goes through here."""

    def __init__(
        self,
        cfg: SynthConfig,
        redis: Redis,
        store: CastStore,
        reader: LogReader,
        held: Holdings,
        metrics: SynthMetrics,
    ) -> None:
        self.cfg, self.redis, self.store, self.reader = cfg, redis, store, reader
        self.held = held
        self.metrics = metrics

    # ---- finished ---------------------------------------------------------------------------

    async def finish(self, cast: ActiveCast) -> None:
        """`eos`, then the receipt, then XACK: a crash in between repeats only the idempotent rest."""
        eos = Eos(sentences=len(cast.chunks), audio_ms=cast.offset_ms, attempts=cast.attempt)
        try:
            cast.tail = await self.store.append(cast.cast_id, cast.tail, [eos])
        except SeqMismatch as exc:
            self.lose(cast, f"eos refused ({exc})")
            return
        self.held.close(cast)
        try:
            await self._settle_finished(cast)
        except RedisError as exc:  # the eos stands: the job comes back, finds it, and settles
            log.warning("cast %s: Redis error after its eos (%r); settling it again soon", cast.cast_id, exc)
            self.retry_soon(cast.job.entry_id, self.held.inbox_of(cast.job))

    async def _settle_finished(self, cast: ActiveCast) -> None:
        """The receipt, then XACK: a crash in between repeats the receipt (receipts may repeat)."""
        first_audio_ms = 0
        if cast.first_audio_seq is not None:
            first = await self.reader.read(cast.cast_id, cast.first_audio_seq, 1)
            if first and cast.job.enqueued_at:
                first_audio_ms = max(0, first[0].ts - cast.job.enqueued_at)
        receipt = castlog.Done(
            id=cast.cast_id,
            attempts=cast.attempt,
            sentences=len(cast.chunks),
            audio_ms=cast.offset_ms,
            synth_ms=int(cast.synth_s * 1000),
            first_audio_ms=first_audio_ms,
            finished_at=jobs.now_ms(),
        )
        await castlog.announce_done(self.redis, receipt)
        await jobs.ack(self.redis, cast.job.entry_id, cast.job.stream)
        log.info("cast %s finished: %d sentences, %d ms audio", cast.cast_id, len(cast.chunks), cast.offset_ms)

    async def publish_receipt(self, job: Assignment, entries: list[castlog.Entry]) -> None:
        """The receipt of a cast finished earlier, from its log (receipts may repeat: their
        consumers take them as idempotent, keyed by cast id)."""
        eos = entries[-1].record
        assert isinstance(eos, Eos)
        first = next((e for e in entries if e.kind == "audio"), None)
        first_audio_ms = max(0, first.ts - job.enqueued_at) if first is not None and job.enqueued_at else 0
        await castlog.announce_done(self.redis, castlog.Done(
            id=job.cast_id, attempts=eos.attempts, sentences=eos.sentences, audio_ms=eos.audio_ms,
            synth_ms=0, first_audio_ms=first_audio_ms, finished_at=entries[-1].ts or jobs.now_ms(),
        ))

    # ---- failed -----------------------------------------------------------------------------

    async def fail(self, cast: ActiveCast, reason: str) -> None:
        """This attempt failed in the model or encoder: count it, then retry after a backoff
        (the job stays pending) or give up."""
        if cast.closed:
            return
        self.held.close(cast)
        try:
            failures = await jobs.count_failure(self.redis, cast.job.entry_id)
        except RedisError as exc:
            self.retry_soon(cast.job.entry_id, self.held.inbox_of(cast.job))  # decided when Redis is back
            log.warning("cast %s: could not count its failure (%r); retrying", cast.cast_id, exc)
            return
        if failures < self.cfg.max_attempts:
            delay = self.cfg.backoff_s(failures)
            log.warning("cast %s: attempt %d failed (%s); retrying in %.1fs", cast.cast_id, cast.attempt, reason, delay)
            self.metrics.retries.inc()
            self.held.inbox_of(cast.job).retry_later(cast.job.entry_id, delay)
            return
        try:
            await self.give_up(cast.job, cast.tail, reason, cast.attempt)
        except RedisError as exc:  # the job stays pending; its lease brings it back
            log.error("cast %s: could not record the failure (%r); leaving the job pending", cast.cast_id, exc)

    async def give_up(self, job: Assignment, tail: int | None, reason: str, attempts: int) -> None:
        """The terminal answer: `error` (when the cast has a log), `jobs/dead`, XACK."""
        reason = reason[:MAX_REASON_CHARS]
        if tail is not None:
            try:
                await self.store.append(job.cast_id, tail, [Error(reason=reason, attempts=attempts)])
            except SeqMismatch as exc:
                log.warning("cast %s: error record refused (%s): another worker owns it", job.cast_id, exc)
                return
        log.error("cast %s failed for good after %d attempt(s): %s", job.cast_id, attempts, reason)
        await castlog.dead_letter(self.redis, job.cast_id, attempts, reason, self.cfg.consumer)
        self.metrics.dead_letters.inc()
        await jobs.ack(self.redis, job.entry_id, job.stream)

    # ---- requeued, lost ---------------------------------------------------------------------

    def requeue(self, cast: ActiveCast, why: str) -> None:
        """Redis failed us, not the cast: drop the attempt and admit the job again soon (it
        plans from the log's true tail; nothing counts against the job)."""
        if not cast.closed:
            log.warning("cast %s: %s; trying the job again in %.1fs", cast.cast_id, why, REDIS_RETRY_S)
            self.held.close(cast)
            self.retry_soon(cast.job.entry_id, self.held.inbox_of(cast.job))

    def retry_soon(self, entry_id: str, inbox: Inbox) -> None:
        """Admit the job again after a Redis error: the chunk it had in hand did not kill us."""
        self.held.requeued.add(entry_id)
        inbox.retry_later(entry_id, REDIS_RETRY_S)

    def lose(self, cast: ActiveCast, why: str) -> None:
        """Another worker owns the cast now: stop, and leave its job to that worker (no XACK)."""
        if not cast.closed:
            log.warning("cast %s: lost to another worker (%s); dropping it", cast.cast_id, why)
            self.held.close(cast)
