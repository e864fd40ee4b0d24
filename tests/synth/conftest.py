"""Model fixtures: one real onnx synthesizer per test session (about 2 s to load on 2 cores)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from synth.model import Synthesizer, load_synthesizer
from synth.model.assets import onnx_vocab

# Tests share the machine's two cores with whatever else runs.
TEST_THREADS = 2
VOICE = "af_heart"  # from the npm packs (the session's model_dir)
SENTENCES = ("Hello there.", "This is a post deployment check.", "It has three sentences.")


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(scope="session")
def synthesizer(model_cache: Path, model_dir: Path) -> Iterator[Synthesizer]:
    synth = load_synthesizer("onnx", model_dir=str(model_dir), cache_dir=str(model_cache), threads=TEST_THREADS)
    synth.warm_up()
    yield synth


@pytest.fixture(scope="session")
def speech(synthesizer: Synthesizer) -> list[np.ndarray]:
    """Three short sentences of real model output, as the worker would encode them."""
    return [synthesizer.synthesize(text, VOICE) for text in SENTENCES]


@pytest.fixture(scope="session")
def voice() -> str:
    """An English voice, installed from npm's kokoro-js packs."""
    return VOICE


@pytest.fixture(scope="session")
def sentences() -> tuple[str, ...]:
    """The texts behind ``speech``, in order."""
    return SENTENCES


@pytest.fixture(scope="session")
def vocab() -> dict[str, int]:
    return onnx_vocab()
