"""The model layer's seam: what the worker may call, and what a backend must provide.

Everything here is synchronous and may block for seconds (inference, weight loading): the
worker calls it from a thread, never from the event loop.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

Audio = npt.NDArray[np.float32]
# Per token (pads included), the frames of 600 samples the model gave it: where words fall.
Durations = npt.NDArray[np.int64]
# One word of a chunk and where it falls in the chunk's audio: (text, start ms, end ms).
Word = tuple[str, int, int]


class BackendUnavailableError(RuntimeError):
    """A backend cannot load here; the message says what to install or set."""


class UnknownVoiceError(ValueError):
    """The voice is not one of ``Synthesizer.voices()``."""


class Synthesizer(Protocol):
    """One loaded Kokoro model with its voices and G2P.

    Calls may come from any thread, one at a time per instance (the worker runs one
    inference thread); none of them touches the event loop.
    """

    name: str

    def voices(self) -> list[str]:
        """The voice ids this synthesizer accepts, sorted (for example ``jf_alpha``)."""
        ...

    def warm_up(self) -> None:
        """Load lazily built state and run one short inference, so the first real chunk is
        as fast as the rest."""
        ...

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> Audio:
        """One chunk of text -> float32 PCM, 24 kHz mono, in [-1, 1].

        A chunk longer than ``MAX_PHONEMES`` phonemes is split at word boundaries and the
        pieces are concatenated. Text with nothing to say gives an empty array.
        """
        ...


class Engine(Protocol):
    """A backend's inference: token ids -> audio. It knows nothing of text or voices."""

    name: str

    def infer(self, token_ids: list[int], style: npt.NDArray[np.float32], speed: float) -> tuple[Audio, Durations]:
        """``token_ids`` without the pads (at most ``MAX_PHONEMES``); ``style`` is one
        (256,) style vector. Returns float32 PCM at the reference model's loudness, and each
        token's frames of 600 samples, the pads included (where words fall: timing.py)."""
        ...
