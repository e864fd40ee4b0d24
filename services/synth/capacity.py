"""Capacity-aware admission, as pure functions: what the admitted casts demand of the model, whether
a newcomer fits, and when each cast waiting in line will start.

A worker's **capacity** is the audio its model makes per wall second: 1 / the measured real-time
factor (:class:`~synth.scheduler.ModelSpeed`, kept current from every timed chunk). A cast's
**demand** is the audio per wall second it needs from now on so that a listener who started at
its first audio never stalls: with ``left`` seconds of audio still to make and a lead of ``lead``
seconds, made at a steady rate ``r`` it ends with ``lead + left - left / r`` in hand, which is not
negative exactly when ``r >= left / (left + lead)``. A newcomer (no audio, no lead) demands 1. The
sum of demands fitting within the capacity is the fluid condition under which lowest-lead-first
starves no listener; ``SYNTH_ADMIT_HEADROOM`` keeps a margin for what the fluid picture leaves
out (first chunks cut in, chunks come whole, the speed moves). [R:admit-within-capacity]

:func:`forecast` replays that rule forward to tell a waiting cast about when it starts: every
worker's admitted casts are made chunk by chunk, lowest lead first, at the rate its model makes
audio in chunks of FORECAST_CHUNK_S by its fitted cost (:class:`Pool`, :func:`known_rate`), and
the head of the line is admitted wherever it fits first.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .cast import ActiveCast
from .scheduler import ModelSpeed

# The audio one step of the forecast makes: about a later chunk (80-300 characters of speech).
FORECAST_CHUNK_S = 5.0


@dataclass(frozen=True)
class Need:
    """One admitted cast as admission weighs it: audio seconds still to make, and its lead. An
    open (live) cast's need counts against the capacity, but it is admitted apart (SYNTH_MAX_LIVE)."""

    left_s: float
    lead_s: float
    live: bool = False


def known_capacity(speed: ModelSpeed, measure_s: float) -> float:
    """The worker's capacity once its model has made ``measure_s`` seconds of audio (a first
    chunk alone says little: short chunks run at another speed); 0 (unknown) until then."""
    return speed.capacity if speed.measured_s >= measure_s else 0.0


def known_rate(speed: ModelSpeed, measure_s: float) -> float:
    """As :func:`known_capacity`, the rate the forecast replays the worker at: the model's in
    chunks of FORECAST_CHUNK_S (ModelSpeed.rate)."""
    return speed.rate(FORECAST_CHUNK_S) if speed.measured_s >= measure_s else 0.0


def needs_of(casts: Iterable[ActiveCast], speed: ModelSpeed, now: float) -> list[Need]:
    """The needs of the casts in hand: the audio their chunks not yet made will give (at the
    model's measured audio per character), and their leads (0 before the first audio)."""
    out = []
    for cast in casts:
        if cast.closed:
            continue
        left = speed.audio_s(sum(len(c) for c in cast.chunks[cast.next_synth:]), cast.reading_speed)
        lead = cast.pace.lead(now)
        out.append(Need(left, lead if math.isfinite(lead) else 0.0, cast.live))
    return out


def demand(need: Need) -> float:
    """Audio seconds per wall second the cast needs from now on so that its listener never stalls
    (0 once it has nothing left to make; 1 for a cast without audio or behind its listener)."""
    if need.left_s <= 0:
        return 0.0
    return need.left_s / (need.left_s + max(0.0, need.lead_s))


def room(needs: Iterable[Need], capacity: float, headroom: float) -> int:
    """How many newcomers (each demanding 1) fit beside ``needs``. A worker making no whole text
    admits one whatever its capacity and its open casts (the line always moves: nobody starves),
    and one whose speed is not measured yet (``capacity`` 0) no more than that one."""
    needs = list(needs)
    idle = not any(n.left_s > 0 and not n.live for n in needs)
    spare = capacity * headroom - sum(demand(n) for n in needs) if capacity > 0 else 0.0
    return max(int(spare + 1e-9), 1 if idle else 0)


@dataclass
class Pool:
    """One worker as the forecast sees it: its capacity, its admitted casts' needs, and the rate
    its model makes audio at in the forecast's chunks (:func:`known_rate`; 0: unknown, its
    capacity stands in). The forecast replays the worker at its rate: its capacity counts a
    slower chunk at once, and each cast's short first chunk is slow (the model's fixed cost a
    reading), so the capacity is low just when a cast joins, when the notes are made, and climbs
    back over the next chunks, before the line moves."""

    capacity: float
    needs: list[Need] = field(default_factory=list)
    rate: float = 0.0


def forecast(
    pools: Sequence[Pool],
    waiting_s: Sequence[float],
    *,
    headroom: float,
    first_s: float = 0.0,
    horizon_s: float = 3600.0,
) -> list[float | None]:
    """Seconds from now until each waiting cast (``waiting_s``: their audio, in line order) hears
    its first audio: when admission lets it in somewhere, plus ``first_s`` for its first chunk.
    None for a cast that starts past ``horizon_s``, or when no worker's speed is known."""
    starts: list[float | None] = [None] * len(waiting_s)
    clocks = [(0.0, i, list(p.needs)) for i, p in enumerate(pools) if p.capacity > 0]
    heapq.heapify(clocks)  # each worker's own clock: the one furthest behind moves next
    head = 0
    while clocks and head < len(waiting_s):
        now, w, needs = heapq.heappop(clocks)
        if now > horizon_s:
            break
        rate = pools[w].rate or pools[w].capacity  # where the worker's capacity settles, chunk after chunk
        if room(needs, rate, headroom) > 0:
            starts[head] = now + first_s
            needs.append(Need(waiting_s[head], 0.0))
            head += 1
        else:
            now += _step(needs, rate)
        heapq.heappush(clocks, (now, w, needs))
    return starts


def _step(needs: list[Need], rate: float) -> float:
    """One chunk for the cast with the lowest lead (as :func:`scheduler.pick` would give it); the
    wall seconds it took. Everyone's listener moves on meanwhile; finished casts leave."""
    i = min(range(len(needs)), key=lambda k: needs[k].lead_s if needs[k].left_s > 0 else float("inf"))
    made = min(FORECAST_CHUNK_S, needs[i].left_s)
    took = made / rate
    moved = [Need(n.left_s - (made if k == i else 0.0), n.lead_s - took + (made if k == i else 0.0), n.live)
             for k, n in enumerate(needs)]
    needs[:] = [n for n in moved if n.left_s > 1e-9]
    return took
