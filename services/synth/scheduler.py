"""The live schedule: which cast gets the model next, and how fast the model is.

Pure functions of the casts, read through :class:`Schedulable` (nothing in it can be set): each
active cast shows the schedule its :class:`Pace` (a frozen value) and the work it has left, and
the clock is passed in. :func:`pick` changes
nothing: it returns a :class:`Decision` that the worker applies. So the policy is unit-tested
without a model, Redis or real time. docs/design.md's rule, one lead per cast:

    lead = audio made (s) - (now - first audio made)

Always one chunk for the cast with the lowest lead; a cast with no audio yet has the lowest
possible lead, so its short first chunk goes first, with one exception (see :func:`pick`): a
listener who would run dry while that first chunk is made goes before it. The unit of fairness
is one chunk.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from chunking.cuts import FIRST_WORDS_CHARS, SPOKEN_CHARS_PER_S

# A cast that has not produced audio is behind every cast that has.
NO_AUDIO_LEAD = -math.inf
# Weight of the newest chunk in the model's smoothed speed.
SPEED_WEIGHT = 0.25
# Weight of a faster chunk in admission's speed (a slower one counts at once).
RECOVER_WEIGHT = 0.1
# The ramp's shortest chunk: about the first phrase's length.
RAMP_MIN_CHARS = FIRST_WORDS_CHARS


@dataclass(frozen=True)
class Pace:
    """One cast's lead: how far its audio is ahead of a listener who started at its first audio.

    A value: its event methods (:meth:`made` …) give the pace after one, and nothing else changes
    it. The audio
    counts what is appended and what is in hand (synthesized, being encoded): with encoding
    overlapping the next inference, a cast whose chunk is in the encoder must not look as far
    behind as before that chunk, or it would be picked twice for one gap.
    """

    appended_ms: int = 0  # audio in the log, at its exact length
    first_audio_at: float | None = None  # clock seconds when the first audio became available
    admitted_at: float | None = None  # clock seconds when the cast became active (None: long ago)
    yielded: bool = False  # while without audio, it let a listener about to run dry go first
    in_hand_ms: int = 0  # audio synthesized and not yet appended (the model's length until encoded)
    heard_at: float | None = None  # clock seconds of the first append: when a listener can start

    @property
    def audio_ms(self) -> int:
        return self.appended_ms + self.in_hand_ms

    def lead(self, now: float) -> float:
        if self.first_audio_at is None:
            return NO_AUDIO_LEAD
        return self.audio_ms / 1000 - (now - self.first_audio_at)

    def waited(self, now: float) -> float:
        """How long the cast has been active (its listener waiting, while it has no audio)."""
        return math.inf if self.admitted_at is None else now - self.admitted_at

    def dry(self, now: float) -> bool:
        """Whether a listener who started at the first append has heard all that the log holds
        (the chunk appended now comes late: an underrun)."""
        return self.heard_at is not None and self.appended_ms / 1000 < now - self.heard_at

    # ---- the pace after an event at ``now``: the one place a lead moves ----

    def admitted(self, now: float) -> Pace:
        """The cast became active: its listener waits from now."""
        return replace(self, admitted_at=now)

    def made(self, ms: int, now: float) -> Pace:
        """A chunk left the model: ``ms`` of audio in hand (the model's length, before encoding)."""
        first = now if self.first_audio_at is None else self.first_audio_at
        return replace(self, first_audio_at=first, in_hand_ms=self.in_hand_ms + ms)

    def encoded(self, made_ms: int, ms: int) -> Pace:
        """A chunk in hand was encoded: its ``made_ms`` (as :meth:`made` counted it) is ``ms`` now,
        its exact length (the encoder trims silence)."""
        return replace(self, in_hand_ms=self.in_hand_ms - made_ms + ms)

    def appended(self, ms: int, now: float) -> Pace:
        """An encoded chunk of ``ms`` reached the log: a listener can hear it."""
        heard = now if self.heard_at is None else self.heard_at
        return replace(self, appended_ms=self.appended_ms + ms, in_hand_ms=self.in_hand_ms - ms, heard_at=heard)

    def yielding(self) -> Pace:
        """A newcomer let a listener about to run dry go first (it does so once)."""
        return replace(self, yielded=True)


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


@dataclass(frozen=True)
class Decision(Generic[S]):
    """What the schedule decided: the cast that gets the next chunk (None: none now), and the
    newcomers that let it go first (each to be marked, :meth:`Pace.yielding`)."""

    cast: S | None
    yielded: tuple[S, ...] = ()


def pick(casts: Iterable[S], now: float, *, first_chunk_s: float = 0.0) -> Decision[S]:
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
    prevent it. The exception names the newcomers that yielded in the decision.
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
        return Decision(at_risk, tuple(newcomers))
    return Decision(best)


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
    audio_s_per_char: float = 0.0  # the audio a character makes at speed 1 (admission's estimates)
    # Admission's RTF: a slower chunk counts at once, faster ones a little at a time, so that a
    # moment of speed (a shared machine's other load pausing) does not admit what it cannot keep.
    slow_rtf: float = 0.0
    measured_s: float = 0.0  # audio made since the worker started: how much the speed rests on
    # The ramp's measure: model seconds per character the model read, the words of a seam's
    # neighbours included (synth.seams), at speed 1. Per second of audio kept, a chunk cut inside
    # a sentence costs about twice a whole one (it reads five more words): the RTF above counts
    # that, as admission must; the ramp sizes what the model reads, so it must not.
    read_s_per_char: float = 0.0

    def observe(self, seconds: float, chars: int, audio_s: float, speed: float = 1.0, read_chars: int = 0) -> None:
        """A chunk of ``chars`` characters read at ``speed`` into ``audio_s`` in ``seconds``, the
        model having read ``read_chars`` (its neighbours' words too; 0: the chunk alone)."""
        self.s_per_char = _smooth(self.s_per_char, seconds / max(1, chars))
        # at speed v the model makes 1/v of the audio, in about 1/v of the time
        self.read_s_per_char = _smooth(self.read_s_per_char, seconds * max(speed, 0.01) / max(1, read_chars or chars))
        if audio_s > 0:
            self.measured_s += audio_s
            rtf = seconds / audio_s
            self.rtf = _smooth(self.rtf, rtf)
            self.slow_rtf = max(rtf, self.slow_rtf + RECOVER_WEIGHT * (rtf - self.slow_rtf))
            # at speed 1: a cast read at another speed makes its audio at that rate
            self.audio_s_per_char = _smooth(self.audio_s_per_char, audio_s * speed / max(1, chars))

    @property
    def capacity(self) -> float:
        """Audio seconds the model makes per wall second (1 / its slower recent RTF); 0 until measured."""
        return 1.0 / self.slow_rtf if self.slow_rtf > 0 else 0.0

    def audio_s(self, chars: int, speed: float = 1.0) -> float:
        """About how much audio ``chars`` characters of text make at ``speed``: as measured, else
        at SPOKEN_CHARS_PER_S until the model has made some."""
        per_char = self.audio_s_per_char or 1 / SPOKEN_CHARS_PER_S
        return chars * per_char / max(speed, 0.01)

    def gap_chars(self, gap_s: float) -> int | None:
        """The longest chunk the model makes within ``gap_s`` (at least RAMP_MIN_CHARS); None
        until the speed is known."""
        if self.s_per_char <= 0:
            return None
        return max(RAMP_MIN_CHARS, int(gap_s / self.s_per_char))

    def first_chunk_s(self, listeners: int) -> float:
        """About how long a first chunk (a first clause, as long as it gets) takes, for
        :func:`pick`; 0 (no exception to newcomers first) until the speed is known, or when the
        model cannot feed ``listeners`` real-time listeners anyway: then some listener runs dry
        whatever the order, and a newcomer's first audio comes first."""
        if self.rtf == 0 or listeners * self.rtf >= 1:
            return 0.0
        return self.s_per_char * FIRST_WORDS_CHARS

    def ramp_chars(self, lead_s: float, speed: float = 1.0, context_chars: int = 0) -> int | None:
        """The longest chunk the model makes before a listener ``lead_s`` seconds ahead runs dry:
        what the model reads for it (the chunk and its ``context_chars`` of neighbours' words)
        takes no longer than the lead at the model's own speed, so the ramp grows by about 1/r a
        chunk (doubling at r = 0.5, by a tenth at r = 0.9, twentyfold on a GPU). Never below
        RAMP_MIN_CHARS (a model slower than real time stalls whatever the cut: short chunks only
        cost more of it); None (no cut) until the speed is known."""
        if self.read_s_per_char <= 0:
            return None
        chars = max(0.0, lead_s) * max(speed, 0.01) / self.read_s_per_char - context_chars
        return max(RAMP_MIN_CHARS, int(chars))


def ramp_limit(
    speed: ModelSpeed, pace: Pace, now: float, reading_speed: float = 1.0, gap_s: float | None = None,
    context_chars: int = 0,
) -> int | None:
    """The longest next chunk of a cast at ``pace`` (ModelSpeed.ramp_chars of its lead), and, for
    a live cast (``gap_s``), no longer than the model makes in ``gap_s`` (ModelSpeed.gap_chars):
    its audio messages never further apart than a framework waits. None before its first audio
    (its first chunk is the splitter's phrase) or while the model's speed is unknown."""
    if pace.first_audio_at is None:
        return None
    limits = [speed.ramp_chars(pace.lead(now), reading_speed, context_chars), speed.gap_chars(gap_s) if gap_s else None]
    return min((n for n in limits if n is not None), default=None)


def _smooth(old: float, new: float) -> float:
    return new if old == 0 else old + SPEED_WEIGHT * (new - old)

