"""The live schedule, as pure functions with the clock passed in, and a simulated worker loop
driving a stand-in synthesizer over simulated time (applying each decision as the worker does)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from chunking.cuts import FIRST_WORDS_CHARS
from synth.scheduler import (
    NO_AUDIO_LEAD,
    ModelSpeed,
    Pace,
    pick,
)


@dataclass
class Cast:
    name: str
    chunks_ms: list[int]  # the audio length of each chunk
    pace: Pace = field(default_factory=Pace)
    done: int = 0

    @property
    def wants_chunk(self) -> bool:
        return self.done < len(self.chunks_ms)

    @property
    def chunks_left(self) -> int:
        return len(self.chunks_ms) - self.done


def at(audio_ms: int, first_at: float | None) -> Cast:
    return Cast("c", [1000], Pace(audio_ms, first_at))


def test_lead_is_audio_ahead_of_a_listener_who_started_at_the_first_audio() -> None:
    assert Pace(10_000, 100.0).lead(104.0) == 6.0
    assert Pace(2_000, 100.0).lead(105.0) == -3.0
    assert Pace().lead(1e9) == NO_AUDIO_LEAD == -math.inf


def test_pace_add_starts_the_listener_clock_at_the_first_chunk() -> None:
    pace = Pace().made(3_000, 50.0).made(2_000, 52.0)
    assert pace.first_audio_at == 50.0 and pace.audio_ms == 5_000 and pace.lead(52.0) == 3.0


def test_a_chunk_counts_in_the_lead_from_the_model_on_at_its_exact_length_once_encoded() -> None:
    made = Pace().made(3_000, 50.0)
    encoded = made.encoded(3_000, 2_600)  # the encoder trimmed silence
    assert encoded.lead(51.0) == 1.6 and encoded.appended_ms == 0 and not encoded.dry(60.0)
    heard = encoded.appended(2_600, 51.0)
    assert heard.audio_ms == 2_600 and heard.in_hand_ms == 0 and heard.heard_at == 51.0
    assert not heard.dry(53.5) and heard.dry(53.7)  # the listener started at the append
    assert made.audio_ms == 3_000 and Pace().audio_ms == 0  # each step gave a new pace


@pytest.mark.rule("lowest-lead-first")
def test_pick_takes_the_lowest_lead() -> None:
    ahead, behind, middle = at(20_000, 0.0), at(5_000, 0.0), at(9_000, 0.0)
    assert pick([ahead, behind, middle], now=3.0).cast is behind


def test_pick_prefers_a_cast_without_audio_and_breaks_ties_by_admission_order() -> None:
    old, new1, new2 = at(1_000, 0.0), at(0, None), at(0, None)
    assert pick([old, new1, new2], now=5.0).cast is new1
    assert pick([new2, new1], now=5.0).cast is new2


def test_pick_skips_casts_without_work_left() -> None:
    finished = at(0, None)
    finished.done = 1
    other = at(50_000, 0.0)
    assert pick([finished, other], now=1.0).cast is other
    assert pick([finished], now=1.0).cast is None
    assert pick([], now=1.0).cast is None


def simulate(casts: list[Cast], rtf: float, first_chunk_s: float = 0.0) -> list[tuple[str, float]]:
    """Drive the schedule as the worker does: one chunk per pick, taking ``rtf`` x its audio
    length of model time. Returns (cast, time) of each append."""
    now, log = 0.0, []
    while (decision := pick(casts, now, first_chunk_s=first_chunk_s)).cast is not None:
        for newcomer in decision.yielded:
            newcomer.pace = newcomer.pace.yielding()
        cast = decision.cast
        ms = cast.chunks_ms[cast.done]
        now += rtf * ms / 1000
        cast.done += 1
        cast.pace = cast.pace.made(ms, now)
        log.append((cast.name, now))
    return log


def underruns(casts: list[Cast], log: list[tuple[str, float]]) -> int:
    """Appends that came after a listener (from that cast's first audio on) ran out."""
    count = 0
    for cast in casts:
        times = [t for name, t in log if name == cast.name]
        heard = 0.0
        for k, t in enumerate(times):
            if k and heard < t - times[0]:
                count += 1
            heard += cast.chunks_ms[k] / 1000
    return count


@pytest.mark.rule("lowest-lead-first")
def test_fairness_unit_is_one_chunk_and_equal_casts_alternate() -> None:
    a, b = Cast("a", [2_000] * 6), Cast("b", [2_000] * 6)
    log = simulate([a, b], rtf=0.4)
    names = [name for name, _ in log]
    assert names[:2] == ["a", "b"]  # each new cast gets its first chunk before anyone's second
    assert all(names[k] != names[k + 1] for k in range(len(names) - 1))  # strict alternation


def test_three_casts_below_capacity_each_get_first_audio_early_and_never_run_dry() -> None:
    casts = [
        Cast("short", [3_000] + [4_000] * 3),
        Cast("mid", [3_000] + [4_000] * 8),
        Cast("long", [3_000] + [4_000] * 15),
    ]
    log = simulate(casts, rtf=0.2)  # 3 listeners need 0.6 of the model: below capacity
    first = {name: next(t for n, t in log if n == name) for name in ("short", "mid", "long")}
    last = {name: max(t for n, t in log if n == name) for name in ("short", "mid", "long")}
    assert max(first.values()) < min(last.values())  # every first audio before any cast ends
    assert max(first.values()) <= 3 * 0.2 * 3.0 + 1e-9  # the three first chunks, back to back
    assert underruns(casts, log) == 0


def test_over_capacity_the_lowest_lead_rule_spreads_the_shortfall() -> None:
    casts = [Cast(name, [3_000] + [4_000] * 10) for name in ("a", "b", "c")]
    log = simulate(casts, rtf=0.5)  # 3 listeners need 1.5 models: someone must wait
    leads = [c.pace.lead(log[-1][1]) for c in casts]
    assert max(leads) - min(leads) <= 4.0  # nobody is served far ahead of the others


def test_a_cast_that_fell_behind_is_served_until_it_catches_up() -> None:
    ahead = Cast("ahead", [3_000] * 10, Pace(30_000, 0.0))
    behind = Cast("behind", [3_000] * 10, Pace(3_000, 0.0))
    log = simulate([ahead, behind], rtf=0.5)
    names = [name for name, _ in log]
    # Leads 3 s and 30 s; each chunk of "behind" gains it 1.5 s on "ahead": 9 chunks to meet.
    assert names[:8] == ["behind"] * 8
    assert "ahead" in names[8:10]


# Audio per character of English text, about what Kokoro speaks.
MS_PER_CHAR = 75


def bench_casts(whole_first_sentences: bool = False) -> list[Cast]:
    """Three casts by their chunks' lengths in characters as the splitter plans them (texts/short.txt,
    the paragraph's first two sentences, its next four), admitted at once: each opens with its
    first clause, about a second of audio (or as the splitter planned them before, up to 80)."""
    shapes = {"short": (13, 28, 23), "mid": (29, 37, 47, 100), "long": (10, 55, 37, 64, 127, 90)}
    if whole_first_sentences:
        shapes = {"short": (13, 28, 23), "mid": (67, 47, 100), "long": (32, 71, 64, 127, 90)}
    return [Cast(name, [n * MS_PER_CHAR for n in chars], Pace(admitted_at=0.0)) for name, chars in shapes.items()]


def stall_s(cast: Cast, log: list[tuple[str, float]]) -> float:
    """How long the cast's listener (from its first audio on) waited for audio in all."""
    times = [t for name, t in log if name == cast.name]
    heard = waited = 0.0
    for k, t in enumerate(times):
        waited += max(0.0, t - times[0] - heard - waited)
        heard += cast.chunks_ms[k] / 1000
    return waited


def first_and_last(log: list[tuple[str, float]]) -> tuple[dict[str, float], dict[str, float]]:
    names = {name for name, _ in log}
    first = {name: min(t for n, t in log if n == name) for name in names}
    last = {name: max(t for n, t in log if n == name) for name in names}
    return first, last


@pytest.mark.rule("first-chunks-first")
def test_casts_that_arrive_together_each_get_their_first_clause_before_any_second_chunk() -> None:
    for rtf in (0.2, 0.5):  # a GPU (three listeners need 0.6 of the model), this CPU (1.5 models)
        casts = bench_casts()
        log = simulate(casts, rtf, rtf * FIRST_WORDS_CHARS * MS_PER_CHAR / 1000)
        assert sorted(name for name, _ in log[:3]) == ["long", "mid", "short"], rtf
        first, last = first_and_last(log)
        assert max(first.values()) < min(last.values())  # every first audio before any cast ends


def test_below_capacity_first_clauses_make_every_listener_wait_less_in_all() -> None:
    """A short first chunk can leave a listener a moment dry at the second (three casts started
    together, the model 60 % busy), but the wait before the first audio shrinks by far more."""
    rtf = 0.2
    clauses, sentences = bench_casts(), bench_casts(whole_first_sentences=True)
    log = simulate(clauses, rtf, rtf * FIRST_WORDS_CHARS * MS_PER_CHAR / 1000)
    before = simulate(sentences, rtf, rtf * 80 * MS_PER_CHAR / 1000)
    first, _ = first_and_last(log)
    first_before, _ = first_and_last(before)
    assert max(first.values()) < max(first_before.values()) / 2
    for new, old in zip(clauses, sentences):
        assert first[new.name] + stall_s(new, log) <= first_before[old.name] + stall_s(old, before), new.name


@pytest.mark.rule("first-chunks-first")
def test_a_listener_about_to_run_dry_goes_before_a_newcomer_that_has_not_waited_long() -> None:
    def scene() -> tuple[Cast, Cast, Cast]:
        """At 10 s: leads of 0.5 s and 20 s, and a cast admitted half a second ago, without audio."""
        risky, safe = Cast("r", [1000] * 3, Pace(10_500, 0.0)), Cast("s", [1000] * 3, Pace(30_000, 0.0))
        return risky, safe, Cast("n", [1000], Pace(admitted_at=9.5))

    risky, safe, newcomer = scene()
    decision = pick([safe, newcomer, risky], now=10.0, first_chunk_s=1.0)
    assert decision.cast is risky and decision.yielded == (newcomer,)
    newcomer.pace = newcomer.pace.yielding()  # as the worker applies it
    assert newcomer.pace.yielded
    assert pick([safe, newcomer, risky], now=10.0, first_chunk_s=1.0).cast is newcomer  # it yields once
    risky, safe, newcomer = scene()
    assert pick([safe, newcomer, risky], now=10.0).cast is newcomer  # the model's speed not known yet
    assert pick([safe, newcomer, risky], now=10.6, first_chunk_s=1.0).cast is newcomer  # waited long enough
    risky.done = 2
    assert pick([safe, newcomer, risky], now=10.0, first_chunk_s=1.0).cast is newcomer  # not for a last chunk
    # a listener already dry does not hold a newcomer back; one far ahead is not at risk
    dry = Cast("d", [1000] * 3, Pace(5_000, 0.0))  # lead -5 s
    assert pick([dry, newcomer, safe], now=10.0, first_chunk_s=1.0).cast is newcomer
    # with no newcomer, the lowest lead as always (the dry one)
    assert pick([safe, risky, dry], now=10.0, first_chunk_s=1.0).cast is dry


def test_model_speed_follows_recent_chunks_and_drops_the_exception_when_it_cannot_keep_up() -> None:
    speed = ModelSpeed()
    assert speed.first_chunk_s(listeners=1) == 0.0  # unknown until a chunk was made
    speed.observe(1.0, 100, audio_s=5.0)  # rtf 0.2
    assert speed.first_chunk_s(listeners=3) == 0.3  # 10 ms a character, a first clause of 30
    assert speed.first_chunk_s(listeners=5) == 0.0  # 5 x 0.2: every listener needs the whole model
    for _ in range(30):
        speed.observe(2.0, 100, audio_s=5.0)  # slower: rtf 0.4
    assert 0.58 < speed.first_chunk_s(listeners=2) <= 0.6
    assert speed.first_chunk_s(listeners=3) == 0.0  # 3 x 0.4 > 1: over capacity


def test_over_capacity_every_first_audio_still_comes_before_any_cast_ends() -> None:
    rtf = 0.5  # this CPU with three casts: they need 1.5 models
    casts = bench_casts()
    log = simulate(casts, rtf, first_chunk_s=rtf * FIRST_WORDS_CHARS * MS_PER_CHAR / 1000)
    first, last = first_and_last(log)
    assert max(first.values()) < min(last.values())


@pytest.mark.rule("first-chunks-first")
def test_a_cast_heard_only_after_a_newcomer_arrived_does_not_go_before_it() -> None:
    # arrived together: "r" got its first chunk first, and is thin, but "n" gets its first next
    risky, newcomer = Cast("r", [1000] * 3, Pace(1_000, 0.2, admitted_at=0.0)), Cast("n", [1000], Pace(admitted_at=0.0))
    assert pick([risky, newcomer], now=0.4, first_chunk_s=1.0).cast is newcomer
