"""The worker: jobs in through the consumer group, one chunk at a time out to the cast logs.

Its tasks share one event loop and one :class:`~synth.crew.Crew`, built here: the settings,
Redis and the stores, the casts in hand (:class:`~synth.hand.Hand`), the metrics and the
clock. Every job leaves through :class:`~synth.outcomes.Outcomes`, the only writer of acks, dead
letters and receipts:

- the *admitters* turn jobs into active casts, recovering each from its log
  (:mod:`synth.admission`): whole-text jobs only while they fit the model's measured capacity
  (:mod:`synth.capacity`), open casts up to ``SYNTH_MAX_LIVE``;
- the *queue clerk* publishes this worker's capacity and, on one worker at a time, tells the casts
  waiting in line their place and when they start (:mod:`synth.clerk`);
- the *synth loop* picks the cast with the lowest lead and runs exactly one chunk of it on the
  model thread (:mod:`synth.dispatcher`);
- two *append loops*, one per appender (:mod:`synth.appender`), encode the chunks on threads of their own
  (overlapping the next inference), append them by conditional append at the tail they expect,
  and finish complete casts (an attempt's first chunk is encoded on the model thread and
  appended by the synth loop itself, before the next inference);
- the *broadcasts* loop, the worker's one stream loop, cuts the casts in hand short when they are
  cancelled, carries out the admin's deletes (:mod:`synth.broadcasts`) and, as the *live feed*,
  reads the text of open casts as it grows (:mod:`synth.livefeed`);
- the *lease loop* (here) refreshes the leases of the jobs this worker holds.

A conditional append that finds another tail means another worker owns the cast now: the cast
is dropped without acknowledging its job. Jobs are acknowledged only after `eos` or `error`.

Only a chunk that raises in the model or encoder is a failed attempt (counted in the job's
tally); a Redis error puts the job back to be tried again soon, uncounted, and a worker's death
counts only against the chunk it had in hand (``SYNTH_MAX_CRASHES_PER_CHUNK``). On stop, the
worker finishes the chunk in hand and hands its other jobs back at once for any worker to claim.
"""

from __future__ import annotations

import asyncio
import logging
import time

from redis.asyncio import Redis
from redis.exceptions import RedisError

import castlog
from castlog import CastStore, LiveStore, LogReader
from castlog.lanes import LaneMover
from fanout import stop_tasks
from servicekit.connect import is_cluster

from . import jobs, scheduler
from .admission import Admitter
from .appender import Appender
from .broadcasts import CancelHandler, DeleteHandler, stream_loop
from .cast import job_key
from .clerk import QueueClerk
from .config import SynthConfig
from .crew import Crew
from .dispatcher import Dispatcher
from .hand import Hand, pause_after, quietly
from .inbox import Inbox
from .livefeed import LiveFeed
from .metrics import SynthMetrics
from .model import Synthesizer
from .outcomes import Outcomes

log = logging.getLogger(__name__)


class Worker:
    def __init__(
        self,
        cfg: SynthConfig,
        redis: Redis,
        synthesizer: Synthesizer,
        *,
        metrics: SynthMetrics | None = None,
    ) -> None:
        metrics = metrics or SynthMetrics()
        def inbox(stream: str) -> Inbox:
            return Inbox(redis, cfg.consumer, lease_ms=cfg.lease_ms, claim_every_s=cfg.refresh_s, poll_s=cfg.poll_s,
                         stream=stream, fair_window=cfg.fair_window)

        # Open casts come through their own stream, admitted apart from the others (SYNTH_MAX_LIVE).
        hand = Hand(inbox(castlog.JOBS), inbox(castlog.JOBS_LIVE), metrics)
        self.crew = crew = Crew(
            cfg=cfg, redis=redis, store=CastStore(redis), reader=LogReader(redis), live=LiveStore(redis, cfg.content_key.encode()),
            hand=hand, metrics=metrics, clock=time.monotonic, speed=scheduler.ModelSpeed(),
        )
        self.store = crew.store  # (tests and benchmarks reach the writes through it)
        self.casts = crew.hand.casts  # job entry id -> cast, in admission order
        self.outcomes = Outcomes(crew)  # every ack, dead letter and receipt
        self.admitter = Admitter(crew, self.outcomes, frozenset(synthesizer.voices()))
        self.feed = LiveFeed(crew, self.outcomes)
        # cancels, the admin's deletes asked through intake and the open casts' text: one blocked read
        self.broadcasts = stream_loop(redis, cfg.poll_s, CancelHandler(crew, self.outcomes),
                                      DeleteHandler(redis, cfg.admin_token), self.feed)
        hand.opened = self.broadcasts.wake
        # An open cast's sentence is encoded and appended by an appender of its own, so it never waits
        # behind whole-text chunks in the encoder (one in flight per open cast keeps it in order).
        self.appenders = (Appender(crew, self.outcomes, "synth-encode"),
                          Appender(crew, self.outcomes, "synth-encode-live"))
        self.dispatcher = Dispatcher(crew, synthesizer, self.appenders)
        self.clerk = QueueClerk(crew, synthesizer.name)

    # ---- lifecycle -------------------------------------------------------------------------

    async def run(self) -> None:
        """Work until :meth:`stop`; then finish the chunk in hand, hand the unfinished jobs back
        to the group (another worker claims them at once) and return."""
        for inbox in self.crew.hand.inboxes:
            await inbox.open()
        await self.appenders[0].warm()
        side = [asyncio.create_task(self.admitter.run()), asyncio.create_task(self._lease_loop())]
        side += [asyncio.create_task(self.admitter.run_live()), asyncio.create_task(self.broadcasts.run())]
        side += [asyncio.create_task(self._move_loop())]
        side += [asyncio.create_task(self.clerk.run())]  # the line's places and estimates
        main = [asyncio.create_task(self.dispatcher.run())]
        main += [asyncio.create_task(appender.run()) for appender in self.appenders]
        try:
            running = set(side + main)
            while not all(task.done() for task in main):
                done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # a loop ended by an exception is a bug: surface it
        finally:
            await stop_tasks(*side, *main)  # a loop on a blocking read may outlive one cancel
            if self.crew.hand.stopping:
                await self._hand_back()
                await quietly(self.clerk.resign())
            for pool in (self.dispatcher.pool, *(appender.pool for appender in self.appenders)):
                pool.shutdown(wait=False)
            self.crew.metrics.active_casts.set(0)
            log.info("worker %s stopped; %d cast(s) left pending", self.crew.cfg.consumer, len(self.casts))

    async def _hand_back(self) -> None:
        """Give every job we hold back to the group at once, and leave the group if we hold nothing."""
        redis, consumer, handed = self.crew.redis, self.crew.cfg.consumer, 0
        for inbox in self.crew.hand.inboxes:
            held = list(self.crew.hand.active(inbox)) + inbox.held()
            try:
                await jobs.release(redis, held)  # no chunk in hand: the next owner counts no death
                handed += await jobs.hand_back(redis, consumer, held, inbox.stream)
                await jobs.delete_consumer_if_empty(redis, consumer, inbox.stream)
            except RedisError as exc:  # they stay ours: our restart or a take-over after the lease resumes them
                log.warning("could not hand back %d job(s) (%s); they resume after the lease", len(held), exc)
                return
        if handed:
            log.info("handed back %d job(s) for other workers to take now", handed)
        self.casts.clear()

    def stop(self) -> None:
        """Stop admitting and picking chunks; :meth:`run` returns once the chunk in hand is in."""
        self.crew.hand.stop()

    # ---- the key lanes' jobs ----------------------------------------------------------------

    async def _move_loop(self) -> None:
        """Move the key lanes' jobs into ``jobs`` / ``jobs/live`` (castlog/lanes.py; not the
        appenders of ``self.appenders``); pending moves of this or a dead worker are taken up every
        ``refresh_s``."""
        cfg = self.crew.cfg
        mover = LaneMover(self.crew.redis, cfg.consumer, lease_ms=cfg.lease_ms,
                          single_redis=not is_cluster(self.crew.redis), replicas=cfg.wait_replicas,
                          wait_ms=cfg.wait_timeout_ms)
        last_pending = -float("inf")
        while True:
            try:
                if last_pending == -float("inf"):
                    await mover.open()
                now = self.crew.clock()
                pending = now - last_pending >= cfg.refresh_s
                await mover.sweep(int(cfg.poll_s * 1000), pending=pending)
                if pending:
                    last_pending = now
            except RedisError as exc:
                if await pause_after(exc, "key lane mover"):
                    last_pending = -float("inf")  # open the lanes' group again, then sweep all

    # ---- leases -----------------------------------------------------------------------------

    async def _lease_loop(self) -> None:
        while True:
            await asyncio.sleep(self.crew.cfg.refresh_s)
            await quietly(self.refresh_leases(), "lease refresh")

    async def refresh_leases(self) -> None:
        """Reset the idle time of every job we hold; drop the casts whose job is no longer ours."""
        redis, consumer = self.crew.redis, self.crew.cfg.consumer
        for inbox in self.crew.hand.inboxes:
            held = list(self.crew.hand.active(inbox)) + inbox.held()
            owners = await jobs.pending(redis, held, inbox.stream)
            mine = [i for i in held if i in owners and owners[i].consumer == consumer]
            await jobs.refresh(redis, consumer, mine, inbox.stream)
            for entry_id in set(held) - set(mine):
                inbox.forget(entry_id)
                cast = self.casts.get(job_key(inbox.stream, entry_id))
                if cast is not None:
                    self.outcomes.lose(cast, "its job was taken over or acknowledged elsewhere")
