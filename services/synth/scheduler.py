"""The live schedule: which cast gets the model next, and whether a new job may be admitted.

Pure functions over a small :class:`Pace` per cast, with the clock passed in, so the policy is
unit-tested without a model, Redis or real time. DESIGN.md's rule:

    lead = audio_ms_appended / 1000 - (now - first_audio_appended_at)

Always one chunk for the cast with the lowest lead; a cast with no audio yet has the lowest
possible lead, so its short first chunk goes first. The unit of fairness is one chunk.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

# A cast that has not produced audio is behind every cast that has.
NO_AUDIO_LEAD = -math.inf


@dataclass
class Pace:
    """How far a cast's audio is ahead of a listener who started at its first audio.

    ``audio_ms`` counts the audio appended plus the audio synthesized and being encoded (in
    hand): with encoding overlapping the next inference, a cast whose chunk is in the encoder
    must not look as far behind as before that chunk, or it would be picked twice for one gap.
    """

    audio_ms: int = 0
    first_audio_at: float | None = None  # clock seconds when the first audio became available

    def lead(self, now: float) -> float:
        if self.first_audio_at is None:
            return NO_AUDIO_LEAD
        return self.audio_ms / 1000 - (now - self.first_audio_at)

    def add(self, audio_ms: int, now: float) -> None:
        """Account one more chunk of ``audio_ms`` that became available at ``now``."""
        if self.first_audio_at is None:
            self.first_audio_at = now
        self.audio_ms += audio_ms


class Schedulable(Protocol):
    @property
    def pace(self) -> Pace: ...

    @property
    def wants_chunk(self) -> bool:
        """True while the cast has chunks left to synthesize in its current attempt."""
        ...


S = TypeVar("S", bound=Schedulable)


def pick(casts: Iterable[S], now: float) -> S | None:
    """The cast that gets the next chunk: the lowest lead among those with work left.

    Ties go to the earliest in ``casts`` (admission order), so new casts are served first come,
    first served.
    """
    best: S | None = None
    best_lead = math.inf
    for cast in casts:
        if not cast.wants_chunk:
            continue
        lead = cast.pace.lead(now)
        if best is None or lead < best_lead:
            best, best_lead = cast, lead
    return best


def all_lead(casts: Iterable[Schedulable], now: float, threshold_s: float) -> bool:
    """True when every cast with work left leads its listeners by more than ``threshold_s``."""
    return all(c.pace.lead(now) > threshold_s for c in casts if c.wants_chunk)


def admissible(
    casts: Sequence[Schedulable], now: float, *, cap: int, max_active: int, threshold_s: float
) -> int:
    """How many new jobs may be admitted now.

    Below the cap: the free slots. At or above it: one more (re-checked after each admission)
    while every admitted cast leads by more than the threshold, because then the model has time
    to spare for a newcomer before anyone runs dry; never beyond ``max_active``.
    """
    held = len(casts)
    if held < cap:
        return cap - held
    if held < max_active and all_lead(casts, now, threshold_s):
        return 1
    return 0
