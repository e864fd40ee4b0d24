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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
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
# What a second of a listener's buffer after a sentence is worth against a second of stall in it
# (ramp_cut): with 0 the ramp cuts wherever that saves a moment now, however much it costs the
# model (and the next sentence's listener); with 1 it never cuts inside a sentence. Half, as the
# simulated worker of bench/bench_ramp.py found best from a GPU to a CPU at real time.
BUFFER_WORTH = 0.5
# ReadCost: the weight of a reading against the next one's, and the spread of reading lengths
# (characters) above which a fixed cost is fitted.
READ_DECAY = 0.9
READ_SPREAD_CHARS = 10.0
# Weights of two ways to cut (seconds) closer than this are a tie: the fewer pieces win.
TIE_S = 0.01
# The share of SYNTH_LIVE_GAP_S a live cast's piece may take by the model's fitted cost: a
# reading runs over its fit by a fifth now and then on a shared CPU, and its encoding and append
# come after it, before the next audio message.
GAP_SHARE = 0.8


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
    # The ramp's measure: the model's time to read a text, the words of a seam's neighbours
    # included (synth.seams), at speed 1, as a fixed cost a reading plus a cost a character
    # (ReadCost). Per second of audio kept, a chunk cut inside a sentence costs far more than a
    # whole one (it reads five more words, and pays the fixed cost again): the RTF above counts
    # that, as admission must; the ramp weighs each cut by what the model reads for it.
    read: ReadCost = field(default_factory=lambda: ReadCost())

    def observe(self, seconds: float, chars: int, audio_s: float, speed: float = 1.0, read_chars: int = 0) -> None:
        """A chunk of ``chars`` characters read at ``speed`` into ``audio_s`` in ``seconds``, the
        model having read ``read_chars`` (its neighbours' words too; 0: the chunk alone)."""
        self.s_per_char = _smooth(self.s_per_char, seconds / max(1, chars))
        # at speed v the model makes 1/v of the audio, in about 1/v of the time
        self.read.observe(read_chars or chars, seconds * max(speed, 0.01))
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

    def rate(self, audio_s: float) -> float:
        """Audio seconds a wall second the model makes in chunks of ``audio_s`` seconds, read
        whole (its fitted cost, ReadCost): where ``capacity`` counts each chunk as it came,
        a cast's short first chunk (mostly the fixed cost) at once; 0 until measured."""
        per_char = self.audio_s(1)
        took = self.read_s(round(audio_s / per_char))
        return audio_s / took if took > 0 else 0.0

    def audio_s(self, chars: int, speed: float = 1.0) -> float:
        """About how much audio ``chars`` characters of text make at ``speed``: as measured, else
        at SPOKEN_CHARS_PER_S until the model has made some."""
        per_char = self.audio_s_per_char or 1 / SPOKEN_CHARS_PER_S
        return chars * per_char / max(speed, 0.01)

    def read_s(self, chars: int, speed: float = 1.0) -> float:
        """About how long the model takes to read ``chars`` characters at ``speed`` (0 until measured)."""
        fixed_s, per_char = self.read.cost()
        return (fixed_s + per_char * chars) / max(speed, 0.01)

    def first_chunk_s(self, listeners: int) -> float:
        """About how long a first chunk (a first clause, as long as it gets) takes, for
        :func:`pick`; 0 (no exception to newcomers first) until the speed is known, or when the
        model cannot feed ``listeners`` real-time listeners anyway: then some listener runs dry
        whatever the order, and a newcomer's first audio comes first."""
        if self.rtf == 0 or listeners * self.rtf >= 1:
            return 0.0
        return self.s_per_char * FIRST_WORDS_CHARS


@dataclass
class ReadCost:
    """The model's time to read ``chars`` characters, fitted over its recent readings as a fixed
    cost plus a cost a character (least squares, each reading weighing READ_DECAY of the next).
    The fixed cost is real: onnx on a CPU spends about half a second on any text (its padding's
    audio), so a 30-character chunk read with its neighbours' words makes less audio than its
    model time where a whole sentence makes twice it. Until the readings differ in length by
    about READ_SPREAD_CHARS, all the cost is a character's."""

    weight: float = 0.0
    chars: float = 0.0
    seconds: float = 0.0
    chars_sq: float = 0.0
    chars_seconds: float = 0.0

    def observe(self, chars: int, seconds: float) -> None:
        d = READ_DECAY
        self.weight, self.chars, self.seconds = d * self.weight + 1, d * self.chars + chars, d * self.seconds + seconds
        self.chars_sq, self.chars_seconds = d * self.chars_sq + chars * chars, d * self.chars_seconds + chars * seconds

    def cost(self) -> tuple[float, float]:
        """(fixed seconds, seconds a character); (0, 0) before any reading."""
        if self.chars <= 0:
            return 0.0, 0.0
        spread = self.weight * self.chars_sq - self.chars * self.chars  # weight² x the variance
        if spread > (self.weight * READ_SPREAD_CHARS) ** 2:
            per_char = (self.weight * self.chars_seconds - self.chars * self.seconds) / spread
            fixed = (self.seconds - per_char * self.chars) / self.weight
            if fixed >= 0 and per_char > 0:
                return fixed, per_char
        return 0.0, self.seconds / self.chars


@dataclass(frozen=True)
class Cut:
    """A place the next chunk may be cut, ``chars`` characters in: the model reads ``ahead``
    characters of the next words with the head, and ``behind`` of the head's last words with the
    rest (synth.seams). For the whole chunk: its length, and the words it is read with."""

    chars: int
    ahead: int = 0
    behind: int = 0
    later: bool = False  # only where a later piece may be cut (a word boundary its rest's ramp may choose)


def ramp_cut(
    speed: ModelSpeed, pace: Pace, now: float, whole: Cut, cuts_of: Callable[[], Sequence[Cut]],
    reading_speed: float = 1.0, gap_s: float | None = None,
) -> int | None:
    """Where a cast at ``pace`` cuts its next chunk (``whole``): the index of one of its cuts
    (``cuts_of()``, asked only when a cut is weighed), or None, the chunk as it is (also before
    the cast's first audio, whose first chunk is the splitter's phrase, and while the model's
    speed is unknown).

    Every way to make the chunk in pieces at ``cuts`` is weighed: the stall its listener
    (``pace``'s lead buffered) meets while the model reads the pieces one after another, less
    BUFFER_WORTH of what is buffered after the last; the first piece of the lightest is cut now
    (the rest is weighed again at its turn). A head that fits the lead avoids a stall now, but
    reads its neighbours' words and pays the model's fixed cost again: where the lead is thin it
    can leave the listener further behind than a longer piece would, and the next one thinner
    still (cut after cut at the shortest, a cast fell behind and never climbed back: #37). A chunk
    the model reads within the lead is not cut (no cut is lighter). For a live cast (``gap_s``)
    only first pieces the model reads within GAP_SHARE of the gap are weighed (else the shortest
    cut): its audio messages never further apart than a framework waits."""
    if pace.first_audio_at is None or speed.read.chars <= 0:
        return None
    buffered = max(0.0, pace.lead(now))

    def read_s(start: Cut, end: Cut) -> float:
        return speed.read_s(end.chars - start.chars + start.behind + end.ahead, reading_speed)

    gap = None if gap_s is None else gap_s * GAP_SHARE
    whole_s = read_s(Cut(0, behind=whole.behind), Cut(whole.chars, ahead=whole.ahead))
    if whole_s <= buffered and (gap is None or whole_s <= gap):
        return None
    cuts = cuts_of()
    order = sorted(range(len(cuts)), key=lambda k: cuts[k].chars)  # points[j] is cuts[order[j - 1]]
    points = [Cut(0, behind=whole.behind), *(cuts[k] for k in order), Cut(whole.chars, ahead=whole.ahead)]
    # Ways to reach each point, forward: (stall, buffered, pieces, -first piece, the cut made now:
    # an index of cuts, None for the whole); one that stalls more and leaves less is dropped.
    ways: list[list[tuple[float, float, int, int, int | None]]] = [[] for _ in points]
    ways[0] = [(0.0, buffered, 0, 0, None)]
    for k, start in enumerate(points[:-1]):
        ways[k].sort(key=lambda w: (w[0], -w[1]))
        kept, most = [], -1.0
        for way in ways[k]:
            if way[1] > most:
                kept.append(way)
                most = way[1]
        for stalled, left, pieces, first, head in kept:
            for j in range(k + 1, len(points)):
                if k == 0 and points[j].later:
                    continue
                took = read_s(start, points[j])
                if k == 0 and gap is not None and took > gap:
                    break  # longer first pieces take longer still
                heard = speed.audio_s(points[j].chars - start.chars, reading_speed)
                now_cut = (order[j - 1] if j < len(points) - 1 else None) if k == 0 else head
                ways[j].append((stalled + max(0.0, took - left), max(0.0, left - took) + heard, pieces + 1,
                                -points[j].chars if k == 0 else first, now_cut))
    done = [(stalled - BUFFER_WORTH * left, pieces, first, head) for stalled, left, pieces, first, head in ways[-1]]
    if not done:  # a live cast that no first piece keeps within the gap: its shortest
        return min((k for k, c in enumerate(cuts) if not c.later), key=lambda k: cuts[k].chars, default=None)
    least = min(d[0] for d in done)
    return min((d for d in done if d[0] <= least + TIE_S), key=lambda d: d[1:3])[3]


def _smooth(old: float, new: float) -> float:
    return new if old == 0 else old + SPEED_WEIGHT * (new - old)

