"""The shared pipeline with a stand-in engine: splitting, voices, speed, empty input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunking import MAX_PHONEMES
from synth.model import UnknownVoiceError
from synth.model.pipeline import KokoroSynthesizer, split_phonemes
from synth.model.voices import STYLE_DIM, VoiceBank, load_voices

SAMPLES_PER_TOKEN = 10


class RecordingEngine:
    """Returns SAMPLES_PER_TOKEN samples per token (one frame each, as durations) and remembers each call."""

    name = "stand-in"

    def __init__(self) -> None:
        self.calls: list[tuple[list[int], npt.NDArray[np.float32], float]] = []

    def infer(
        self, token_ids: list[int], style: npt.NDArray[np.float32], speed: float
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        self.calls.append((token_ids, style, speed))
        return np.full(len(token_ids) * SAMPLES_PER_TOKEN, 2.0, dtype=np.float32), np.ones(len(token_ids) + 2, np.int64)


@pytest.fixture
def engine() -> RecordingEngine:
    return RecordingEngine()


@pytest.fixture
def stand_in(engine: RecordingEngine, vocab: dict[str, int]) -> KokoroSynthesizer:
    # Row i of the pack is filled with i, so a test can read which row was used.
    pack = np.repeat(np.arange(MAX_PHONEMES, dtype=np.float32), STYLE_DIM).reshape(MAX_PHONEMES, 1, STYLE_DIM)
    return KokoroSynthesizer(engine, VoiceBank({"af_test": pack}), vocab)


def test_long_phonemes_are_split_under_the_window_and_concatenated(
    stand_in: KokoroSynthesizer, engine: RecordingEngine
) -> None:
    phonemes = ", ".join(["həlˈO wˈɜɹld"] * 60)  # 898 symbols
    audio = stand_in.synthesize_phonemes(phonemes, "af_test")
    assert len(engine.calls) == 2
    assert all(len(ids) <= MAX_PHONEMES for ids, _, _ in engine.calls)
    assert len(audio) == sum(len(ids) for ids, _, _ in engine.calls) * SAMPLES_PER_TOKEN


def test_style_row_follows_the_phoneme_count(stand_in: KokoroSynthesizer, engine: RecordingEngine) -> None:
    stand_in.synthesize_phonemes("həlˈO", "af_test")
    ids, style, _ = engine.calls[0]
    assert style.shape == (STYLE_DIM,) and style[0] == len(ids) - 1


def test_output_is_clipped_float32(stand_in: KokoroSynthesizer) -> None:
    audio = stand_in.synthesize("Hello.", "af_test")
    assert audio.dtype == np.float32 and audio.max() == 1.0


def test_unknown_symbols_are_dropped_before_inference(
    stand_in: KokoroSynthesizer, engine: RecordingEngine, vocab: dict[str, int]
) -> None:
    stand_in.synthesize_phonemes("hə☃lˈO", "af_test")
    assert engine.calls[0][0] == [vocab[c] for c in "həlˈO"]


def test_text_with_nothing_to_say_gives_empty_audio(stand_in: KokoroSynthesizer, engine: RecordingEngine) -> None:
    audio = stand_in.synthesize("  😀 ", "af_test")
    assert audio.dtype == np.float32 and audio.size == 0 and not engine.calls


def test_unknown_voice_is_refused(stand_in: KokoroSynthesizer) -> None:
    with pytest.raises(UnknownVoiceError, match="af_test"):
        stand_in.synthesize("Hello.", "af_nobody")


@pytest.mark.parametrize("speed", [0.0, -1.0, 10.0])
def test_speed_out_of_range_is_refused(stand_in: KokoroSynthesizer, speed: float) -> None:
    with pytest.raises(ValueError, match="speed"):
        stand_in.synthesize("Hello.", "af_test", speed=speed)


def test_split_prefers_clause_ends() -> None:
    text = "a" * 300 + ", " + "b" * 100 + " " + "c" * 200
    assert split_phonemes(text) == ["a" * 300 + ",", "b" * 100 + " " + "c" * 200]


@settings(deadline=None)  # timing depends on what else runs on the machine
@given(st.lists(st.text(alphabet="abcˈ,.", min_size=1, max_size=40), min_size=1, max_size=60))
def test_split_keeps_every_word_within_the_window(words: list[str]) -> None:
    phonemes = " ".join(words)
    pieces = split_phonemes(phonemes)
    assert all(0 < len(p) <= MAX_PHONEMES for p in pieces)
    assert " ".join(pieces).split() == phonemes.split()


def test_hub_voice_folder_adds_npy_and_raw_bin_packs(tmp_path: Path) -> None:
    voices = tmp_path / "voices"
    voices.mkdir()
    pack = np.random.default_rng(0).standard_normal((MAX_PHONEMES, 1, STYLE_DIM)).astype(np.float32)
    np.save(voices / "af_npy.npy", pack)
    pack.astype("<f4").tofile(voices / "af_raw.bin")
    bank = load_voices(tmp_path)
    assert {"af_npy", "af_raw", "jf_alpha"} <= set(bank.names())
    assert np.array_equal(bank.style("af_raw", 10), pack[9, 0])


def test_an_image_voices_dir_adds_packs_and_model_dir_ones_win(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    baked, mounted = tmp_path / "baked", tmp_path / "model" / "voices"
    baked.mkdir()
    mounted.mkdir(parents=True)
    packs = rng.standard_normal((2, MAX_PHONEMES, 1, STYLE_DIM)).astype("<f4")
    packs[0].tofile(baked / "af_heart.bin")
    packs[0].tofile(baked / "bf_emma.bin")
    packs[1].tofile(mounted / "af_heart.bin")
    bank = load_voices(tmp_path / "model", voices_dir=baked)
    assert {"af_heart", "bf_emma", "jf_alpha"} <= set(bank.names())
    assert np.array_equal(bank.style("bf_emma", 1), packs[0][0, 0])
    assert np.array_equal(bank.style("af_heart", 1), packs[1][0, 0])  # the mounted one wins


def test_hub_voice_folder_loads_torch_packs(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    (tmp_path / "voices").mkdir()
    pack = torch.ones(MAX_PHONEMES, 1, STYLE_DIM)
    torch.save(pack, tmp_path / "voices" / "af_heart.pt")
    assert load_voices(tmp_path).style("af_heart", 3).sum() == STYLE_DIM
