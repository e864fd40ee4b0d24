"""The synth service's model layer: text -> 24 kHz PCM with Kokoro-82M.

    from synth.model import load_synthesizer
    synth = load_synthesizer("auto")          # blocking: call it from a thread
    synth.warm_up()
    pcm = synth.synthesize("Hello there.", "jf_alpha")   # float32, 24 kHz mono, [-1, 1]

Everything here blocks; the worker runs it in a thread, never on the event loop.
"""

from __future__ import annotations

from .base import Audio, BackendUnavailableError, Synthesizer, UnknownVoiceError
from .loader import load_synthesizer

__all__ = [
    "Audio",
    "BackendUnavailableError",
    "Synthesizer",
    "UnknownVoiceError",
    "load_synthesizer",
]
