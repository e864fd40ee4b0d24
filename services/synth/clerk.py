"""The queue clerk: tells the casts waiting in line their place and when they will start.

Every ``SYNTH_QUEUE_NOTE_S`` each worker publishes its measured capacity and its casts' needs in
``synth/capacity`` (one field per consumer). One worker at a time (whoever holds the lock
``synth/queue-clerk``) then reads the line (the jobs workers read ahead to admit clients in turn,
as each publishes them in its order of admission, then the jobs of ``jobs`` the group has not
delivered yet), replays admission forward over every worker's published state (:func:`capacity.forecast`) and
appends to each waiting cast's log a ``queue`` record (:class:`castlog.Queued`) with its place
and about how long until its audio starts, when either moved since its last note. The append is
conditional at the tail the clerk read and only follows `meta`, `queue` or `error`: a cast a
worker has begun meanwhile keeps its `start` last. [R:queue-noted]
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

import castlog
from castlog import Queued, SeqMismatch
from castlog.keys import decoded
from chunking.cuts import FIRST_WORDS_CHARS

from . import capacity, jobs
from .capacity import Need, Pool
from .crew import Crew
from .hand import quietly

# A note is written again when its place changed, or when the new estimate differs from the old
# one counted down (what a client shows) by more than this many seconds, or this share of it.
DRIFT_S = 2.0
DRIFT_SHARE = 0.15
# A worker's published state older than this many rounds belongs to a worker that is gone.
STALE_ROUNDS = 3
# Kinds after which a cast still waits for its first `start` (an `error`: submitted again).
WAITING_KINDS = {"meta", "queue", "error"}
# An `error` this close to (or after) the clerk's read of the line answered the job the clerk saw
# there, not a submit made since: no note follows it, or the failed cast would read as waiting
# for good. The margin covers clocks that differ between hosts; a cast submitted again within it
# is noted a round later.
ERROR_MARGIN_MS = 2000

# KEYS[1]: the clerk's lock; ARGV[1]: this worker, ARGV[2]: how long it holds (ms). Taken when
# free, kept when ours, in one step: between a GET and a PEXPIRE the lock could pass to another
# worker, whose lease this one would then stretch while both noted the line.
ELECT = """
local owner = redis.call('GET', KEYS[1])
if owner and owner ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
# The lock let go at a stop, when ours: another worker notes the line at its next round.
RESIGN = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclass(frozen=True)
class Waiting:
    """One cast in line: its id, its place (1: next), and the audio its whole text makes."""

    cast_id: str
    pos: int
    audio_s: float


class QueueClerk:
    """Publishes this worker's capacity; while it holds the lock, notes the line's places."""

    def __init__(self, crew: Crew, backend: str) -> None:
        self.crew, self.backend = crew, backend
        self._audio_s: dict[str, float] = {}  # cast id -> its text's audio, read once from `meta`
        self._line_read_ms = 0  # when line() last read the line (castlog.now_ms)
        self._elect = crew.redis.register_script(ELECT)
        self._resign = crew.redis.register_script(RESIGN)

    async def run(self) -> None:
        while not self.crew.hand.stopping:
            await quietly(self.round(), "queue clerk")
            await asyncio.sleep(self.crew.cfg.queue_note_s)

    async def round(self) -> None:
        """Publish this worker's state; note the line when this worker is the clerk."""
        await self.publish()
        if await self.elected():
            await self.note_line()

    # ---- this worker's state --------------------------------------------------------------

    async def publish(self) -> None:
        crew = self.crew
        known = capacity.known_capacity(crew.speed, crew.cfg.capacity_measure_s)
        rate = capacity.known_rate(crew.speed, crew.cfg.capacity_measure_s)
        needs = capacity.needs_of(crew.hand.casts.values(), crew.speed, crew.clock())
        state = {
            "backend": self.backend, "capacity": round(known, 4), "rate": round(rate, 4), "at": castlog.now_ms(),
            "needs": [[round(n.left_s, 2), round(n.lead_s, 2), int(n.live)] for n in needs],
            "waiting": crew.hand.inbox.waiting(),  # read ahead, in the order of admission (fair turns)
        }
        crew.metrics.capacity.set(known)
        crew.metrics.demand.set(sum(capacity.demand(n) for n in needs))
        await crew.redis.hset(castlog.SYNTH_CAPACITY, crew.cfg.consumer, json.dumps(state))
        await crew.redis.pexpire(castlog.SYNTH_CAPACITY, int(crew.cfg.queue_note_s * 1000 * STALE_ROUNDS))

    async def elected(self) -> bool:
        """Whether this worker is the clerk now (takes or keeps the lock for a few rounds)."""
        ttl_ms = int(self.crew.cfg.queue_note_s * 1000 * STALE_ROUNDS)
        return bool(await self._elect(keys=[castlog.QUEUE_CLERK], args=[self.crew.cfg.consumer, ttl_ms]))

    async def resign(self) -> None:
        """At a stop: this worker's capacity withdrawn and the lock let go (when ours), so that the
        line is not forecast with a worker gone, nor left unnoted, for the rounds they would stand."""
        await self.crew.redis.hdel(castlog.SYNTH_CAPACITY, self.crew.cfg.consumer)
        await self._resign(keys=[castlog.QUEUE_CLERK], args=[self.crew.cfg.consumer])

    # ---- the line ---------------------------------------------------------------------------

    async def published(self) -> tuple[list[Pool], list[str]]:
        """Every live worker's capacity and needs, as published (those gone are dropped), and the
        cast ids they read ahead: round ``r`` is each worker's ``r``-th (each admits its own in
        parallel)."""
        redis, now = self.crew.redis, castlog.now_ms()
        stale_ms = self.crew.cfg.queue_note_s * 1000 * STALE_ROUNDS
        pools, lists, gone = [], [], []
        for consumer, raw in (await redis.hgetall(castlog.SYNTH_CAPACITY)).items():
            try:
                state = json.loads(raw)
                if now - int(state["at"]) > stale_ms:
                    gone.append(consumer)
                    continue
                needs = [Need(float(left), float(lead), bool(live)) for left, lead, live in state["needs"]]
                pools.append(Pool(float(state["capacity"]), needs, float(state.get("rate", 0.0))))
                lists.append([str(i) for i in state.get("waiting", [])])
            except (ValueError, KeyError, TypeError, AttributeError):
                gone.append(consumer)  # not a worker's state: nobody reads it
        if gone:
            await redis.hdel(castlog.SYNTH_CAPACITY, *gone)
        return pools, [i for ids in zip_longest(*lists) for i in ids if i is not None]  # round r: each list's r-th

    async def line(self) -> tuple[list[Waiting], list[Pool]]:
        """The casts waiting in line, first first: the jobs workers read ahead (published in the
        order each admits them, the workers' lists interleaved), then jobs the group has not
        delivered yet; and the workers' pools they wait for (:meth:`published`)."""
        redis = self.crew.redis
        self._line_read_ms = castlog.now_ms()
        group = await jobs.group_info(redis)
        if group is None:
            return [], []
        after = "(" + decoded(group["last-delivered-id"])
        rows: Any = await redis.xrange(castlog.JOBS, min=after, count=self.crew.cfg.queue_notes_max)
        pools, ids = await self.published()
        for entry_id, fields in rows:
            job = jobs.parse_job(decoded(entry_id), fields, 0)
            if job is not None:
                ids.append(job.cast_id)
        out: list[Waiting] = []
        for cast_id in ids[: self.crew.cfg.queue_notes_max]:
            if castlog.is_cast_id(cast_id) and all(w.cast_id != cast_id for w in out):
                out.append(Waiting(cast_id, len(out) + 1, await self._audio_of(cast_id)))
        self._audio_s = {w.cast_id: self._audio_s[w.cast_id] for w in out if w.cast_id in self._audio_s}
        return out, pools

    async def _audio_of(self, cast_id: str) -> float:
        if cast_id not in self._audio_s:
            first = await self.crew.reader.read(cast_id, 0, 1)
            meta = first[0].record if first else None
            chars = meta.chars if isinstance(meta, castlog.Meta) else 0
            speed = meta.speed if isinstance(meta, castlog.Meta) else 1.0
            self._audio_s[cast_id] = self.crew.speed.audio_s(chars, speed)
        return self._audio_s[cast_id]

    async def note_line(self) -> None:
        """Note each waiting cast's place and estimate where they moved."""
        crew, cfg = self.crew, self.crew.cfg
        waiting, pools = await self.line()
        if not waiting:
            return
        first_s = crew.speed.s_per_char * FIRST_WORDS_CHARS
        starts = capacity.forecast(pools, [w.audio_s for w in waiting],
                                   headroom=cfg.admit_headroom, first_s=first_s, horizon_s=cfg.queue_horizon_s)
        for w, start in zip(waiting, starts):
            await self._note(w, -1 if start is None else round(start * 1000))

    async def _note(self, w: Waiting, eta_ms: int) -> None:
        last = await self.crew.reader.last(w.cast_id, bodies=False)
        if last is None or last.kind not in WAITING_KINDS:
            return  # begun (or gone) meanwhile
        if last.kind == "error" and last.ts > self._line_read_ms - ERROR_MARGIN_MS:
            return  # the job in line was answered meanwhile: it failed for good
        if isinstance(last.record, Queued) and not _moved(last.record, last.ts, w.pos, eta_ms):
            return
        try:
            await self.crew.store.append(w.cast_id, last.seq_num + 1, [Queued(pos=w.pos, eta_ms=eta_ms)])
        except SeqMismatch:
            pass  # a worker began it meanwhile: its `start` stands


def _moved(old: Queued, noted_at_ms: int, pos: int, eta_ms: int) -> bool:
    """Whether a new note says something a client counting the old one down would not show."""
    if old.pos != pos or (old.eta_ms < 0) != (eta_ms < 0):
        return True
    if eta_ms < 0:
        return False
    shown = max(0, old.eta_ms - (castlog.now_ms() - noted_at_ms))
    return abs(eta_ms - shown) > max(DRIFT_S * 1000, DRIFT_SHARE * eta_ms)
