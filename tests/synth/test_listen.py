"""Listening checks: the real model's English read back by Whisper tiny.en (bench/listening.py)."""

from __future__ import annotations

import listening
import numpy as np
import pytest
import seamcheck as seams

from synth.model import Synthesizer


def test_words_are_normalised_on_both_sides() -> None:
    assert listening.words("It's 42 U.S. dollars—in the harbour, at 10:45 p.m.!") == listening.words(
        "it's forty two U.S. dollars in the harbor at ten forty-five PM"
    )


@pytest.mark.parametrize(("reference", "heard", "rate"), [
    ("the ship left the harbour", "the ship left the harbor", 0.0),
    ("the ships left", "the ship left", 1 / 3),  # one substitution
    ("a b c d", "a c d", 1 / 4),  # one deletion
    ("a b", "a x b y", 2 / 2),  # two insertions
])
def test_word_error_rate_counts_edits_per_reference_word(reference: str, heard: str, rate: float) -> None:
    assert listening.wer(reference, heard) == pytest.approx(rate)


def test_silences_inside_chunks_and_at_seams_are_measured() -> None:
    rate = listening.MODEL_RATE
    tone = (0.3 * np.sin(np.arange(rate // 5) * 0.1)).astype(np.float32)  # 200 ms
    gap = np.zeros(rate * 3 // 10, np.float32)  # 300 ms
    chunk = np.concatenate([gap[: rate // 10], tone, gap, tone, gap[: rate // 20]])
    assert abs(listening.longest_inner_silence_ms(chunk) - 300) <= 20
    assert [abs(p - 150) <= 20 for p in listening.seam_pauses_ms([chunk, chunk])] == [True]  # 50 ms tail + 100 ms head


def test_resampling_keeps_a_tone_and_the_duration() -> None:
    t = np.arange(listening.MODEL_RATE) / listening.MODEL_RATE
    out = listening.resample(np.sin(2 * np.pi * 440 * t).astype(np.float32), listening.MODEL_RATE, listening.WHISPER_RATE)
    assert len(out) == listening.WHISPER_RATE
    assert np.argmax(np.abs(np.fft.rfft(out))) == 440  # 1 Hz bins over one second


@pytest.mark.model
@pytest.mark.timeout(900)  # the paragraph is ~35 s of audio: minutes of model time on a loaded CPU
def test_af_heart_reads_the_paragraph_at_most_3_percent_wer(synthesizer: Synthesizer, texts: dict[str, str]) -> None:
    text = texts["paragraph"]
    cast = listening.read_as_cast(synthesizer, text, "af_heart")
    heard = listening.transcribe(cast.pcm)
    assert listening.wer(text, heard) <= 0.03, heard
@pytest.mark.model
@pytest.mark.timeout(1200)  # a dozen sentences, each read whole and cut: minutes on a loaded CPU
@pytest.mark.rule("first-cut-phrase")
@pytest.mark.rule("seam-continues")
def test_a_first_chunk_cut_sounds_like_the_sentence_read_whole(synthesizer: Synthesizer) -> None:
    """The outside set (sentences texts/ never had), each read whole and with its first chunk cut
    as a slow model's worker cuts it: Whisper hears no more errors with the cut (one word over
    the set at most) and no punctuation at the seam; the seam pauses like a breath."""
    measured = [seams.measure(synthesizer, s) for s in seams.outside_sentences()]
    cut = [m for m in measured if m is not None]
    assert len(cut) >= len(measured) // 2  # most of the set is cut: the check checks something
    whole_errors, cut_errors, _ = seams.pooled_errors(cut)
    heard = [(m.head, m.heard_whole, m.heard_cut) for m in cut]
    assert cut_errors <= whole_errors + 1, heard
    assert [m.head for m in cut if seams.seam_marks(m)] == [], heard
    assert max(m.pause_ms for m in cut) <= 100, [(m.head, m.pause_ms) for m in cut]  # was 120-150 ms
    assert float(np.median([m.stretch for m in cut])) < 1.5  # read alone, the last word lasted 2-5x as long
