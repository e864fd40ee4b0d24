"""The torch backend (hexgrad's KModel) with weights rebuilt from the int8 ONNX.

The KModel tests skip only where torch or kokoro is not installed; the converter's pure
parts and the error message are tested everywhere.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from castlog import SAMPLE_RATE
from synth.model import BackendUnavailableError, Synthesizer, load_synthesizer
from synth.model.convert import CHECKSUM_SUFFIX, _Mapper, _torch_gates, converted_weights
from synth.model.kmodel import kmodel_class

HAS_KMODEL = all(importlib.util.find_spec(name) is not None for name in ("torch", "kokoro"))
needs_kmodel = pytest.mark.skipif(not HAS_KMODEL, reason="torch and kokoro are not installed")
TEST_THREADS = 2
# Same voice and text score ~0.99; another voice ~0.85, another sentence ~0.88.
MIN_LOG_MEL_CORRELATION = 0.95
N_FFT, HOP, N_MELS = 1024, 256, 80


@pytest.fixture(scope="module")
def torch_synthesizer(model_cache: Path, model_dir: Path) -> Synthesizer:
    # model_dir holds voices only: the weights are converted from the ONNX
    return load_synthesizer("torch", model_dir=str(model_dir), cache_dir=str(model_cache), threads=TEST_THREADS)


@needs_kmodel
@pytest.mark.model
@pytest.mark.timeout(300)
def test_torch_on_cpu_matches_onnx_on_the_same_phonemes(
    torch_synthesizer: Synthesizer, synthesizer: Synthesizer, speech: list[np.ndarray],
    sentences: tuple[str, ...], voice: str,
) -> None:
    assert torch_synthesizer.name == "torch-cpu"
    phonemes = synthesizer.phonemize(sentences[1], voice)
    assert torch_synthesizer.phonemize(sentences[1], voice) == phonemes
    reference = torch_synthesizer.synthesize_phonemes(phonemes, voice)
    # int8 weights move a token's duration by a frame now and then: lengths differ slightly.
    assert abs(len(reference) - len(speech[1])) < 0.1 * len(speech[1])
    assert log_mel_correlation(reference, speech[1]) >= MIN_LOG_MEL_CORRELATION
    assert 0.05 < np.abs(reference).max() <= 1.0


@needs_kmodel
@pytest.mark.model
@pytest.mark.timeout(300)
def test_converted_weights_are_cached_and_checksummed(torch_synthesizer: Synthesizer, model_cache: Path) -> None:
    from synth.model.assets import onnx_model_path, onnx_vocab

    weights = converted_weights(onnx_model_path(model_cache), model_cache, onnx_vocab())
    sidecar = weights.with_name(weights.name + CHECKSUM_SUFFIX)
    assert sidecar.is_file()
    mtime = weights.stat().st_mtime_ns
    assert converted_weights(onnx_model_path(model_cache), model_cache, onnx_vocab()) == weights
    assert weights.stat().st_mtime_ns == mtime  # not converted twice


def test_weight_norm_split_rebuilds_the_weight_and_survives_dead_channels() -> None:
    target = {"conv.weight_v": np.zeros((2, 3, 4)), "conv.weight_g": np.zeros((2, 1, 1))}
    mapper = _Mapper({}, [], {"conv": object()}, target)
    weight = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    weight[1] = 0.0
    mapper._put_conv("conv", weight)
    v, g = mapper.state["conv.weight_v"], mapper.state["conv.weight_g"]
    assert np.allclose(g[0] * v[0] / np.linalg.norm(v[0]), weight[0], atol=1e-6)
    assert np.all(v[1] == 1.0) and g[1, 0, 0] == 0.0  # no 0/0 when torch recomputes W


def test_lstm_gates_are_reordered_from_onnx_to_torch() -> None:
    i, o, f, c = (np.full((2, 3), k, dtype=np.float32) for k in range(4))
    assert np.array_equal(_torch_gates(np.concatenate([i, o, f, c]))[:, 0], [0, 0, 2, 2, 3, 3, 1, 1])


def test_missing_torch_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes "import torch" fail
    with pytest.raises(BackendUnavailableError, match=r"pip install torch==2\.13\.0"):
        kmodel_class()
    with pytest.raises(BackendUnavailableError, match="kokoro==0.9.4"):
        load_synthesizer("torch")


def log_mel_correlation(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
    """Correlation of two log-mel spectrograms after aligning their frames with DTW."""
    x, y = _log_mel(a), _log_mel(b)
    rows, cols = _dtw_path(x, y)
    return float(np.corrcoef(x[rows].ravel(), y[cols].ravel())[0, 1])


def _log_mel(pcm: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    padded = np.pad(pcm.astype(np.float64), N_FFT // 2)
    frames = 1 + (len(padded) - N_FFT) // HOP
    index = np.arange(N_FFT)[None, :] + HOP * np.arange(frames)[:, None]
    power = np.abs(np.fft.rfft(padded[index] * np.hanning(N_FFT), axis=1)) ** 2
    mel: npt.NDArray[np.float64] = np.log(power @ _mel_filters().T + 1e-6)
    return mel


def _mel_filters() -> npt.NDArray[np.float64]:
    def to_mel(hz: npt.ArrayLike) -> npt.NDArray[np.float64]:
        return 2595 * np.log10(1 + np.asarray(hz, dtype=np.float64) / 700)

    edges = 700 * (10 ** (np.linspace(0, to_mel(SAMPLE_RATE / 2), N_MELS + 2) / 2595) - 1)
    bins = np.fft.rfftfreq(N_FFT, 1 / SAMPLE_RATE)
    low, mid, high = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising, falling = (bins - low) / (mid - low), (high - bins) / (high - mid)
    filters: npt.NDArray[np.float64] = np.clip(np.minimum(rising, falling), 0, None)
    return filters


def _dtw_path(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> tuple[list[int], list[int]]:
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    yn = y / np.linalg.norm(y, axis=1, keepdims=True)
    cost = 1 - xn @ yn.T
    total = np.full((len(x) + 1, len(y) + 1), np.inf)
    total[0, 0] = 0.0
    for i in range(1, len(x) + 1):
        for j in range(1, len(y) + 1):
            total[i, j] = cost[i - 1, j - 1] + min(total[i - 1, j], total[i, j - 1], total[i - 1, j - 1])
    i, j, rows, cols = len(x), len(y), [], []
    while i > 0 and j > 0:
        rows.append(i - 1)
        cols.append(j - 1)
        step = int(np.argmin([total[i - 1, j - 1], total[i - 1, j], total[i, j - 1]]))
        i, j = (i - 1, j - 1) if step == 0 else (i - 1, j) if step == 1 else (i, j - 1)
    return rows[::-1], cols[::-1]
