"""The schedule is a pure function: over any snapshot of casts it changes nothing it was given
and decides the same way every time it is asked."""

from __future__ import annotations

import copy
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from synth.livesched import pick_next
from synth.scheduler import NO_AUDIO_LEAD, Decision, Pace, pick

NOW = 100.0


@dataclass(frozen=True)
class CastView:
    """One cast as the schedule reads it (livesched.Interactive), as a value to generate."""

    pace: Pace
    wants_chunk: bool
    chunks_left: int
    live: bool
    in_flight: int
    typing: bool
    client: str


times = st.one_of(st.none(), st.floats(0.0, NOW))
paces = st.builds(
    Pace,
    appended_ms=st.integers(0, 60_000),
    first_audio_at=times,
    admitted_at=times,
    yielded=st.booleans(),
    in_hand_ms=st.integers(0, 8_000),
    heard_at=times,
)
views = st.builds(
    CastView,
    client=st.sampled_from(["", "a", "b"]),
    pace=paces,
    wants_chunk=st.booleans(),
    chunks_left=st.integers(0, 6),
    live=st.booleans(),
    in_flight=st.integers(0, 2),
    typing=st.booleans(),
)
snapshots = st.lists(views, max_size=8)
clocks = st.floats(NOW, NOW + 30.0)
first_chunk = st.one_of(st.just(0.0), st.floats(0.0, 3.0))
holds = st.one_of(st.just(float("inf")), st.floats(0.0, 30.0))


def same(a: Decision[CastView], b: Decision[CastView]) -> bool:
    """The same decision: the same cast (by identity, not just by value) and the same yields."""
    return a.cast is b.cast and len(a.yielded) == len(b.yielded) and all(x is y for x, y in zip(a.yielded, b.yielded))


@settings(max_examples=300, deadline=None)
@given(snapshots, clocks, first_chunk, holds)
def test_the_schedule_changes_nothing_and_decides_the_same_way_twice(
    casts: list[CastView], now: float, first_chunk_s: float, hold_lead_s: float
) -> None:
    before = copy.deepcopy(casts)
    picked = pick(casts, now, first_chunk_s=first_chunk_s)
    assert same(picked, pick(casts, now, first_chunk_s=first_chunk_s))
    chosen = pick_next(casts, now, first_chunk_s=first_chunk_s, hold_lead_s=hold_lead_s)
    assert same(chosen, pick_next(casts, now, first_chunk_s=first_chunk_s, hold_lead_s=hold_lead_s))
    assert casts == before  # every cast, and every pace in it, as it was


@settings(max_examples=300, deadline=None)
@given(snapshots, clocks, first_chunk)
def test_a_decision_names_only_casts_it_was_given(casts: list[CastView], now: float, first_chunk_s: float) -> None:
    decision = pick_next(casts, now, first_chunk_s=first_chunk_s)
    if decision.cast is not None:
        assert any(decision.cast is c for c in casts) and decision.cast.wants_chunk
    for newcomer in decision.yielded:  # only casts still without audio yield, and each only once
        assert any(newcomer is c for c in casts)
        assert newcomer.pace.lead(now) == NO_AUDIO_LEAD and not newcomer.pace.yielded
    wanting = [c for c in casts if c.wants_chunk and not c.live]
    assert (pick(wanting, now, first_chunk_s=first_chunk_s).cast is None) == (not wanting)
