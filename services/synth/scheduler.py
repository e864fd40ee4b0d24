"""The live schedule: which cast gets the model next, and whether a new job may be admitted.

Pure functions over a small :class:`Pace` per cast, with the clock passed in, so the policy is
unit-tested without a model, Redis or real time. docs/design.md's rule:

    lead = audio_ms_appended / 1000 - (now - first_audio_appended_at)

Always one chunk for the cast with the lowest lead; a cast with no audio yet has the lowest
possible lead, so its short first chunk goes first, with one exception (see :func:`pick`): a
listener who would run dry while that first chunk is made goes before it. The unit of fairness
is one chunk.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from castlog.cuts import FIRST_WORDS_CHARS

# A cast that has not produced audio is behind every cast that has.
NO_AUDIO_LEAD = -math.inf
# Weight of the newest chunk in the model's smoothed speed.
SPEED_WEIGHT = 0.25


@dataclass
class Pace:
    """How far a cast's audio is ahead of a listener who started at its first audio.

    ``audio_ms`` counts the audio appended plus the audio synthesized and being encoded (in
    hand): with encoding overlapping the next inference, a cast whose chunk is in the encoder
    must not look as far behind as before that chunk, or it would be picked twice for one gap.
    """

    audio_ms: int = 0
    first_audio_at: float | None = None  # clock seconds when the first audio became available
    admitted_at: float | None = None  # clock seconds when the cast became active (None: long ago)
    yielded: bool = False  # while without audio, it let a listener about to run dry go first

    def lead(self, now: float) -> float:
        if self.first_audio_at is None:
            return NO_AUDIO_LEAD
        return self.audio_ms / 1000 - (now - self.first_audio_at)

    def waited(self, now: float) -> float:
        """How long the cast has been active (its listener waiting, while it has no audio)."""
        return math.inf if self.admitted_at is None else now - self.admitted_at

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

    @property
    def chunks_left(self) -> int:
        """Chunks still to synthesize in its current attempt."""
        ...


S = TypeVar("S", bound=Schedulable)


def pick(casts: Iterable[S], now: float, *, first_chunk_s: float = 0.0) -> S | None:
    """The cast that gets the next chunk: the lowest lead among those with work left.

    Ties go to the earliest in ``casts`` (admission order), so new casts are served first come,
    first served. A cast without audio (a newcomer) has the lowest lead of all, with one
    exception: a cast whose listener would run dry while a newcomer's first chunk is made (its
    lead is between 0 and ``first_chunk_s``, the model's time for one first chunk) gets one
    chunk first, once per newcomer, while the newcomers have waited less than that, and not its
    last chunk (every cast's first audio still comes before any cast ends), and only when its
    listener was listening before the newcomers came (casts that arrive together each get their
    first chunk before any gets a second). Below capacity
    nobody then runs dry for a newcomer, and a newcomer waits at most one chunk more. A listener
    already dry does not hold newcomers back: serving it first would shorten its stall, not
    prevent it. Picking the exception marks the newcomers as having yielded.
    """
    best: S | None = None
    best_lead = math.inf
    at_risk: S | None = None
    risk_lead = math.inf
    newcomers: list[S] = []
    for cast in casts:
        if not cast.wants_chunk:
            continue
        lead = cast.pace.lead(now)
        if lead == NO_AUDIO_LEAD:
            newcomers.append(cast)
        elif 0 <= lead < first_chunk_s and lead < risk_lead and cast.chunks_left > 1:
            at_risk, risk_lead = cast, lead
        if best is None or lead < best_lead:
            best, best_lead = cast, lead
    if at_risk is not None and newcomers and all(
        not c.pace.yielded and c.pace.waited(now) < first_chunk_s and _heard_before(at_risk, c) for c in newcomers
    ):
        for c in newcomers:
            c.pace.yielded = True
        return at_risk
    return best


def _heard_before(cast: Schedulable, newcomer: Schedulable) -> bool:
    """Whether ``cast``'s listener was already listening when ``newcomer`` arrived: casts that
    arrive together each get their first chunk before any gets a second."""
    heard, arrived = cast.pace.first_audio_at, newcomer.pace.admitted_at
    return heard is not None and arrived is not None and heard <= arrived


@dataclass
class ModelSpeed:
    """The model's recent speed, smoothed: seconds of inference per character of text, and per
    second of audio (the real-time factor)."""

    s_per_char: float = 0.0
    rtf: float = 0.0

    def observe(self, seconds: float, chars: int, audio_s: float) -> None:
        self.s_per_char = _smooth(self.s_per_char, seconds / max(1, chars))
        if audio_s > 0:
            self.rtf = _smooth(self.rtf, seconds / audio_s)

    def first_chunk_s(self, listeners: int) -> float:
        """About how long a first chunk (a first clause, as long as it gets) takes, for
        :func:`pick`; 0 (no exception to newcomers first) until the speed is known, or when the
        model cannot feed ``listeners`` real-time listeners anyway: then some listener runs dry
        whatever the order, and a newcomer's first audio comes first."""
        if self.rtf == 0 or listeners * self.rtf >= 1:
            return 0.0
        return self.s_per_char * FIRST_WORDS_CHARS


def _smooth(old: float, new: float) -> float:
    return new if old == 0 else old + SPEED_WEIGHT * (new - old)


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
