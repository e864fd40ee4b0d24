from __future__ import annotations

import pytest

from castlog import Audio, Entry, Eos, Error, Meta, Start, playable, summarize
from castlog.records import Record


def log(*records: Record) -> list[Entry]:
    return [Entry(n, r) for n, r in enumerate(records)]


def audio(i: int, tag: str = "") -> Audio:
    return Audio(i=i, t=f"s{i}{tag}", d=100 + i, o=0, body=f"{i}{tag}".encode())


def heard(entries: list[Entry]) -> list[str]:
    return [e.record.body.decode() for e in playable(entries)]  # type: ignore[union-attr]


META = Meta(title="t", voice="v", chars=9, sentences=4, created_at=0)


def test_one_attempt_plays_its_audio_in_order() -> None:
    entries = log(META, Start(attempt=1, resume_from=0, at=0), audio(0), audio(1), audio(2), audio(3), Eos(sentences=4, audio_ms=406, attempts=1))
    assert heard(entries) == ["0", "1", "2", "3"]
    state = summarize(entries)
    assert (state.status, state.finished, state.audio_ms, state.attempts) == ("done", 4, 406, 1)


@pytest.mark.rule("playable-view")
def test_two_attempts_with_resume_keep_earlier_prefix() -> None:
    entries = log(META, Start(attempt=1, resume_from=0, at=0), audio(0), audio(1),
                  Start(attempt=2, resume_from=2, at=0), audio(2, "b"), audio(3, "b"))
    assert heard(entries) == ["0", "1", "2b", "3b"]
    assert summarize(entries).next_sentence() == 4


@pytest.mark.rule("playable-view")
def test_two_attempts_without_resume_play_only_the_latest() -> None:
    entries = log(META, Start(attempt=1, resume_from=0, at=0), audio(0), audio(1),
                  Start(attempt=2, resume_from=0, at=0), audio(0, "b"))
    assert heard(entries) == ["0b"]
    state = summarize(entries)
    assert state.next_sentence() == 1 and state.attempts == 2


@pytest.mark.rule("playable-view")
def test_three_attempts_mixing_resume_and_restart() -> None:
    entries = log(META, Start(attempt=1, resume_from=0, at=0), audio(0), audio(1), audio(2),
                  Start(attempt=2, resume_from=1, at=0), audio(1, "b"),
                  Start(attempt=3, resume_from=2, at=0), audio(2, "c"), audio(3, "c"))
    # attempt 2 dropped attempt 1's sentence 2; attempt 3 kept 0 (attempt 1) and 1 (attempt 2)
    assert heard(entries) == ["0", "1b", "2c", "3c"]


def test_resume_from_drops_a_partial_later_sentence_of_earlier_attempt() -> None:
    entries = log(META, Start(attempt=1, resume_from=0, at=0), audio(0), audio(2),
                  Start(attempt=2, resume_from=1, at=0), audio(1, "b"))
    assert heard(entries) == ["0", "1b"]


def test_state_of_new_and_failed_casts() -> None:
    assert summarize(log(META)).status == "queued"
    state = summarize(log(META, Start(attempt=3, resume_from=0, at=0), Error(reason="model crashed", attempts=3)))
    assert (state.status, state.error, state.attempts, state.tail, state.planned) == ("error", "model crashed", 3, 3, 4)
