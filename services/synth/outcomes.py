"""How a job ends, and what the worker writes for each ending: every ack, dead letter and receipt
of the worker is written here, and each job leaves through exactly one of these.

- *finished*: `eos`, then the receipt on ``progress/done``, then XACK (a crash in between repeats
  only the idempotent rest); a job that finds its cast finished earlier republishes the receipt;
- *failed* in the model or encoder: counted in the job's tally, then retried after a backoff
  (the job stays pending) or given up for good: `error` (when the cast has a log), an entry in
  ``jobs/dead``, XACK;
- *settled at admission*, without an attempt (as admission decides): its cast finished earlier
  (the receipt again when the job may have died before it, then XACK), answered already (by the error its cast ends in, or by the job in hand for the same cast: XACK)
  or given up as above; a malformed entry goes to ``jobs/dead`` and is acknowledged;
- *requeued* after a Redis error, which is not the cast's fault: dropped and admitted again
  soon, nothing counted;
- *lost* to another worker (a conditional append found another tail): dropped, its job left
  unacknowledged for that worker.
"""

from __future__ import annotations

import logging

from redis.exceptions import RedisError

import castlog
from castlog import Eos, Error, SeqMismatch

from . import jobs
from .cast import ActiveCast, Assignment, first_audio_ts
from .crew import Crew
from .hand import REDIS_RETRY_S
from .inbox import Inbox

log = logging.getLogger(__name__)

# Longest error text kept in `error` records and `jobs/dead` entries.
MAX_REASON_CHARS = 500


class Outcomes:
    """Settles the jobs of one worker: every ending goes through here."""

    def __init__(self, crew: Crew) -> None:
        self.crew = crew

    # ---- finished ---------------------------------------------------------------------------

    async def finish(self, cast: ActiveCast) -> None:
        """`eos`, then the receipt, then XACK: a crash in between repeats only the idempotent rest."""
        crew = self.crew
        eos = Eos(sentences=len(cast.chunks), audio_ms=cast.offset_ms, attempts=cast.attempt, cancelled=cast.cancelled)
        try:
            cast.tail, finished_at = await crew.store.append_stamped(cast.cast_id, cast.tail, [eos])
        except SeqMismatch as exc:
            self.lose(cast, f"eos refused ({exc})")
            return
        crew.hand.close(cast)
        receipt = _receipt(cast.job, eos, cast.first_audio_ts, finished_at, synth_ms=int(cast.synth_s * 1000))
        try:  # the receipt, then XACK: a crash in between repeats the receipt (receipts may repeat)
            await castlog.announce_done(crew.redis, receipt)
            await jobs.ack(crew.redis, cast.job.entry_id, cast.job.stream)
        except RedisError as exc:  # the eos stands: the job comes back, finds it, and settles
            log.warning("cast %s: Redis error after its eos (%r); settling it again soon", cast.cast_id, exc)
            self.retry_soon(cast.job.entry_id, crew.hand.inbox_of(cast.job))
            return
        log.info("cast %s %s: %d sentences, %d ms audio", cast.cast_id, "cancelled" if cast.cancelled else "finished",
                 len(cast.chunks), cast.offset_ms)

    # ---- settled at admission ---------------------------------------------------------------

    async def finished_earlier(self, job: Assignment, entries: list[castlog.Entry]) -> None:
        """The cast's log ends in `eos`: XACK, after the receipt again when this job may have
        written that eos and died before its receipt."""
        log.info("cast %s is already finished; acknowledging job %s", job.cast_id, job.entry_id)
        if job.deliveries > 1:
            await self._announce_again(job, entries)
        await jobs.ack(self.crew.redis, job.entry_id, job.stream)

    async def answered(self, job: Assignment, why: str) -> None:
        """The job adds nothing: the error its cast ends in answered it, or a job in hand will."""
        log.info("job %s (cast %s): %s; acknowledging it", job.entry_id, job.cast_id, why)
        await jobs.ack(self.crew.redis, job.entry_id, job.stream)

    async def _announce_again(self, job: Assignment, entries: list[castlog.Entry]) -> None:
        """The receipt of a cast finished earlier, from its log (receipts may repeat: their
        consumers take them as idempotent, keyed by cast id)."""
        eos = entries[-1].record
        assert isinstance(eos, Eos)
        finished_at = entries[-1].ts or castlog.now_ms()
        await castlog.announce_done(self.crew.redis, _receipt(job, eos, first_audio_ts(entries), finished_at))

    async def malformed(self, entry_id: str, fields: jobs.Fields, deliveries: int, stream: str) -> None:
        """An entry that is no job: to ``jobs/dead`` (under the id it names, if any), then XACK."""
        log.warning("job %s is malformed (%r); moving it to %s", entry_id, fields, castlog.JOBS_DEAD)
        # "replace": an id that is not UTF-8 is dead-lettered too, not a crash that would recur
        # on every restart while the entry stays pending.
        cast_id = fields.get(b"id", b"?").decode(errors="replace")[:64]
        await self._dead_letter(cast_id, deliveries, "malformed job entry", entry_id, stream)

    # ---- failed -----------------------------------------------------------------------------

    async def fail(self, cast: ActiveCast, reason: str) -> None:
        """This attempt failed in the model or encoder: count it, then retry after a backoff
        (the job stays pending) or give up."""
        if cast.closed:
            return
        crew = self.crew
        crew.hand.close(cast)
        try:
            failures = await jobs.count_failure(crew.redis, cast.job.entry_id)
        except RedisError as exc:
            self.retry_soon(cast.job.entry_id, crew.hand.inbox_of(cast.job))  # decided when Redis is back
            log.warning("cast %s: could not count its failure (%r); retrying", cast.cast_id, exc)
            return
        if failures < crew.cfg.max_attempts:
            delay = crew.cfg.backoff_s(failures)
            log.warning("cast %s: attempt %d failed (%s); retrying in %.1fs", cast.cast_id, cast.attempt, reason, delay)
            crew.metrics.retries.inc()
            crew.hand.inbox_of(cast.job).retry_later(cast.job.entry_id, delay)
            return
        try:
            await self.give_up(cast.job, cast.tail, reason, cast.attempt)
        except RedisError as exc:  # the job stays pending; its lease brings it back
            log.error("cast %s: could not record the failure (%r); leaving the job pending", cast.cast_id, exc)

    async def give_up(self, job: Assignment, tail: int | None, reason: str, attempts: int) -> None:
        """The terminal answer: `error` (when the cast has a log), `jobs/dead`, XACK."""
        crew = self.crew
        reason = reason[:MAX_REASON_CHARS]
        if tail is not None:
            try:
                await crew.store.append(job.cast_id, tail, [Error(reason=reason, attempts=attempts)])
            except SeqMismatch as exc:
                log.warning("cast %s: error record refused (%s): another worker owns it", job.cast_id, exc)
                return
        log.error("cast %s failed for good after %d attempt(s): %s", job.cast_id, attempts, reason)
        await self._dead_letter(job.cast_id, attempts, reason, job.entry_id, job.stream)

    async def _dead_letter(self, cast_id: str, attempts: int, reason: str, entry_id: str, stream: str) -> None:
        """An entry in ``jobs/dead``, counted, then the job's XACK."""
        crew = self.crew
        await castlog.dead_letter(crew.redis, cast_id, attempts, reason, crew.cfg.consumer)
        crew.metrics.dead_letters.inc()
        await jobs.ack(crew.redis, entry_id, stream)

    # ---- requeued, lost ---------------------------------------------------------------------

    def requeue(self, cast: ActiveCast, why: str) -> None:
        """Redis failed us, not the cast: drop the attempt and admit the job again soon (it
        plans from the log's true tail; nothing counts against the job)."""
        if not cast.closed:
            log.warning("cast %s: %s; trying the job again in %.1fs", cast.cast_id, why, REDIS_RETRY_S)
            self.crew.hand.close(cast)
            self.retry_soon(cast.job.entry_id, self.crew.hand.inbox_of(cast.job))

    def retry_soon(self, entry_id: str, inbox: Inbox) -> None:
        """Admit the job again after a Redis error: the chunk it had in hand did not kill us."""
        self.crew.hand.requeued.add(entry_id)
        inbox.retry_later(entry_id, REDIS_RETRY_S)

    def lose(self, cast: ActiveCast, why: str) -> None:
        """Another worker owns the cast now: stop, and leave its job to that worker (no XACK)."""
        if not cast.closed:
            log.warning("cast %s: lost to another worker (%s); dropping it", cast.cast_id, why)
            self.crew.hand.close(cast)


def _receipt(job: Assignment, eos: Eos, first_ts: int | None, finished_at: int, synth_ms: int = 0) -> castlog.Done:
    """The receipt of a cast that ends in ``eos``; its time to first audio counts from the job's
    enqueueing to the cast's first audio record (``first_ts``), 0 where either is not known."""
    first_ms = max(0, first_ts - job.enqueued_at) if first_ts is not None and job.enqueued_at else 0
    return castlog.Done(id=job.cast_id, attempts=eos.attempts, sentences=eos.sentences, audio_ms=eos.audio_ms,
                        synth_ms=synth_ms, first_audio_ms=first_ms, finished_at=finished_at)
