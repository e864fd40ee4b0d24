"""The live-first schedule as a pure function over stand-in casts (no model, no Redis)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from synth.livesched import pick_next
from synth.scheduler import Pace


@dataclass
class Cast:
    name: str
    live: bool = False
    wants_chunk: bool = True
    in_flight: int = 0
    typing: bool = False
    chunks_left: int = 5
    pace: Pace = field(default_factory=Pace)


def leading(name: str, lead_s: float, now: float = 100.0) -> Cast:
    """A whole-text cast whose listener is ``lead_s`` behind its appended audio at ``now``."""
    return Cast(name, pace=Pace(appended_ms=int(1000 * (lead_s + 10)), first_audio_at=now - 10))


@pytest.mark.rule("open-sentence-first")
def test_a_complete_live_sentence_goes_before_batch_lead_work() -> None:
    batch, live = leading("batch", 1.0), Cast("live", live=True)
    assert pick_next([batch, live], 100.0, first_chunk_s=0.5).cast.name == "live"  # type: ignore[union-attr]


@pytest.mark.rule("open-sentence-first")
def test_a_batch_listener_about_to_run_dry_still_comes_first() -> None:
    batch, live = leading("batch", 0.2), Cast("live", live=True)
    assert pick_next([live, batch], 100.0, first_chunk_s=0.5).cast.name == "batch"  # type: ignore[union-attr]


@pytest.mark.rule("open-sentence-first")
def test_one_live_sentence_in_flight_unless_nothing_else_wants_the_model() -> None:
    batch, live = leading("batch", 1.0), Cast("live", live=True, in_flight=1)
    assert pick_next([live, batch], 100.0).cast.name == "batch"  # type: ignore[union-attr]
    assert pick_next([live], 100.0).cast.name == "live"  # type: ignore[union-attr]


def test_far_ahead_casts_wait_while_a_live_sentence_is_typed() -> None:
    typing = Cast("live", live=True, wants_chunk=False, typing=True)
    assert pick_next([leading("batch", 30.0), typing], 100.0, hold_lead_s=10.0).cast is None
    assert pick_next([leading("near", 3.0), typing], 100.0, hold_lead_s=10.0).cast.name == "near"  # type: ignore[union-attr]
    idle = Cast("live", live=True, wants_chunk=False)
    assert pick_next([leading("batch", 30.0), idle], 100.0, hold_lead_s=10.0).cast.name == "batch"  # type: ignore[union-attr]


def test_without_live_casts_it_is_the_lowest_lead() -> None:
    a, b = leading("a", 5.0), leading("b", 2.0)
    assert pick_next([a, b], 100.0).cast.name == "b"  # type: ignore[union-attr]


@pytest.mark.rule("live-fair")
def test_ready_live_casts_take_turns_and_a_newcomer_goes_first() -> None:
    """#21 finding 2: the first admitted live cast with a sentence ready always went first, so a
    client's long text starved every open cast admitted after it."""
    now = 100.0
    busy = Cast("busy", live=True, pace=Pace(appended_ms=20_000, first_audio_at=now - 10))  # 10 s ahead
    behind = Cast("behind", live=True, pace=Pace(appended_ms=11_000, first_audio_at=now - 10))  # 1 s ahead
    assert pick_next([busy, behind], now).cast.name == "behind"  # type: ignore[union-attr]
    newcomer = Cast("new", live=True)  # no audio yet: its first sentence first
    assert pick_next([busy, behind, newcomer], now).cast.name == "new"  # type: ignore[union-attr]
