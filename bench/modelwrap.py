"""``Wrapped``: a synthesizer that hands every call to the real one, the seam of the tests and the
benchmarks, which override only the calls they watch or change (the product never wraps its model)."""

from __future__ import annotations

from synth.model import Audio, Synthesizer
from synth.model.base import Word


class Wrapped:
    """A synthesizer that hands every call to ``real``.

    It forwards every public method of the real synthesizer (``synthesize_timed`` included: the
    worker's path), so a wrapped model runs the path production runs; a test fails when the real
    class gains a method this one does not forward. A wrapper that changes what a chunk gives
    overrides both ``synthesize`` and ``synthesize_timed``.
    """

    def __init__(self, real: Synthesizer) -> None:
        self.real = real
        self.name = real.name

    def voices(self) -> list[str]:
        return self.real.voices()

    def warm_up(self) -> None:
        self.real.warm_up()

    def phonemize(self, text: str, voice: str) -> str:
        return self.real.phonemize(text, voice)

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> Audio:
        return self.real.synthesize(text, voice, speed)

    def synthesize_phonemes(self, phonemes: str, voice: str, speed: float = 1.0) -> Audio:
        return self.real.synthesize_phonemes(phonemes, voice, speed)

    def synthesize_timed(self, text: str, voice: str, speed: float = 1.0) -> tuple[Audio, list[Word]]:
        timed = getattr(self.real, "synthesize_timed", None)  # a stand-in may not time words
        if timed is None:
            return self.real.synthesize(text, voice, speed), []
        return timed(text, voice, speed)  # type: ignore[no-any-return]
