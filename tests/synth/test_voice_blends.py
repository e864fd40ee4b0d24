"""Voice blends in the worker: a blend's pack is the weighted mean of its packs, mixed once."""

from __future__ import annotations

import numpy as np
import pytest

from castlog import canonical_voice, voice_available
from chunking import MAX_PHONEMES
from synth.model import Synthesizer
from synth.model.voices import STYLE_DIM, VoiceBank


def _pack(value: float) -> np.ndarray:
    return np.full((MAX_PHONEMES, 1, STYLE_DIM), value, dtype=np.float32)


@pytest.mark.rule("blend-is-a-voice")
def test_a_blend_is_the_weighted_mean_of_its_packs() -> None:
    bank = VoiceBank({"af_a": _pack(1.0), "af_b": _pack(4.0)})
    blend = canonical_voice("af_a(2)+af_b(1)")
    assert blend in bank and "af_a(1)+af_c(1)" not in bank and "af_a(x" not in bank
    assert bank.style(blend, 10) == pytest.approx(np.full(STYLE_DIM, (2 * 1.0 + 4.0) / 3, np.float32), rel=1e-3)
    assert bank.names() == ["af_a", "af_b"], "a blend is not installed"
    assert voice_available(blend, {"af_a", "af_b"}) and not voice_available(blend, {"af_a"})


@pytest.mark.model
@pytest.mark.rule("blend-is-a-voice")
def test_the_model_speaks_a_blend(synthesizer: Synthesizer) -> None:
    voices = synthesizer.voices()
    first, second = voices[0], voices[1]
    audio = synthesizer.synthesize("A blend of two voices.", canonical_voice(f"{first}(2)+{second}(1)"))
    assert len(audio) > 12_000 and np.abs(audio).max() > 0.05
