"""The live-first schedule as a pure function over stand-in casts (no model, no Redis)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from synth.livesched import MAX_REMEMBERED, Rotation, pick_next
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
    client: str = ""  # '' : a client of its own (as a cast opened without a tag)

    def __post_init__(self) -> None:
        self.client = self.client or f"cast:{self.name}"


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


def serve(casts: list[Cast], rotation: Rotation, now: float, rounds: int) -> list[str]:
    """``rounds`` picks, each chosen cast given 2 s of audio (its chunk made and appended)."""
    order = []
    for _ in range(rounds):
        chosen = pick_next(casts, now, rotation=rotation.last).cast
        assert chosen is not None
        rotation.served(chosen.client)
        first = chosen.pace.first_audio_at if chosen.pace.first_audio_at is not None else now
        chosen.pace = replace(chosen.pace, appended_ms=chosen.pace.appended_ms + 2000, first_audio_at=first)
        order.append(chosen.name)
    return order


@pytest.mark.rule("live-fair")
def test_live_turns_go_round_by_client_not_by_cast() -> None:
    """#21's leftover: turns went by cast, so a client with four open casts ready got four turns
    for another client's one, and that client's first audio waited behind all four."""
    hoarder = [Cast(f"a{k}", live=True, client="A") for k in range(4)]
    other = Cast("b", live=True, client="B")  # admitted last: the tie between casts without audio
    order = serve([*hoarder, other], Rotation(), 100.0, rounds=10)
    assert order.index("b") <= 1  # within one turn of the hoarder's
    assert order.count("b") == 5  # then every other turn: half the model, as the hoarder has
    assert order[0] == "a0" and "b" in order[:2]


@pytest.mark.rule("live-fair")
def test_within_a_client_the_cast_furthest_behind_goes_first() -> None:
    now = 100.0
    ahead = Cast("ahead", live=True, client="A", pace=Pace(appended_ms=20_000, first_audio_at=now - 10))
    behind = Cast("behind", live=True, client="A", pace=Pace(appended_ms=11_000, first_audio_at=now - 10))
    other = Cast("other", live=True, client="B", pace=Pace(appended_ms=30_000, first_audio_at=now - 10))
    rotation = Rotation()
    rotation.served("B")  # B went last: A's turn, and A's cast furthest behind
    assert pick_next([ahead, other, behind], now, rotation=rotation.last).cast.name == "behind"  # type: ignore[union-attr]
    rotation.served("A")
    assert pick_next([ahead, other, behind], now, rotation=rotation.last).cast.name == "other"  # type: ignore[union-attr]


def test_casts_without_a_client_tag_each_take_a_turn_of_their_own() -> None:
    """An older open cast (no tag in its recipe) is a client of its own: the rotation goes by cast."""
    casts = [Cast(f"old{k}", live=True) for k in range(3)]
    assert sorted(serve(casts, Rotation(), 100.0, rounds=3)) == ["old0", "old1", "old2"]


def test_the_rotation_remembers_a_bounded_number_of_clients_without_changing_the_order() -> None:
    rotation = Rotation()
    for k in range(MAX_REMEMBERED + 10):
        rotation.served(f"c{k}")
    assert len(rotation.last) == MAX_REMEMBERED
    assert "c0" not in rotation.last  # the least lately served is forgotten: it goes first anyway
    assert list(rotation.last)[-1] == f"c{MAX_REMEMBERED + 9}"
