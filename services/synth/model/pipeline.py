"""The one Synthesizer: G2P and voices in front of a backend's Engine.

Both backends share everything but inference, as hexgrad's KPipeline (text, voices) sits in
front of KModel (tokens -> audio).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

import numpy as np

from castlog import SAMPLE_RATE
from chunking import MAX_PHONEMES

from .base import Audio, Durations, Engine, UnknownVoiceError
from .g2p import G2P
from .timing import Word, spaced_words, word_times
from .voices import VoiceBank

log = logging.getLogger(__name__)

MIN_SPEED, MAX_SPEED = 0.25, 4.0
# A cut after one of these keeps a clause whole; a cut at a bare space is the fallback.
CLAUSE_ENDS = frozenset(".,;:!?\u2014\u2026")
WARM_UP_TEXT = "Warm up."


class KokoroSynthesizer:
    """Implements ``Synthesizer`` for any ``Engine``."""

    def __init__(self, engine: Engine, voices: VoiceBank, vocab: Mapping[str, int]) -> None:
        self.name = engine.name
        self._engine = engine
        self._voices = voices
        self._vocab = dict(vocab)
        self._g2p = G2P(self._vocab)

    def voices(self) -> list[str]:
        return self._voices.names()

    def warm_up(self) -> None:
        started = time.perf_counter()
        names = self.voices()
        self._g2p.warm_up(names)
        self.synthesize(WARM_UP_TEXT, names[0])
        log.info("%s warmed up in %.2f s", self.name, time.perf_counter() - started)

    def phonemize(self, text: str, voice: str) -> str:
        self._check_voice(voice)
        return self._g2p(text, voice)

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> Audio:
        return self.synthesize_phonemes(self.phonemize(text, voice), voice, speed)

    def synthesize_timed(self, text: str, voice: str, speed: float = 1.0) -> tuple[Audio, list[Word]]:
        """Like ``synthesize``, with each word's (text, start ms, end ms) in the audio returned."""
        self._check_voice(voice)
        _check_speed(speed)
        phonemes, words = self._g2p.with_words(text, voice)
        pieces = split_phonemes(phonemes)
        audio, durations = self._infer(pieces, voice, speed)
        pairs = words if words is not None else spaced_words(text, " ".join(pieces))
        return audio, word_times(pairs, pieces, durations, self._g2p.keep_known)

    def synthesize_phonemes(self, phonemes: str, voice: str, speed: float = 1.0) -> Audio:
        self._check_voice(voice)
        _check_speed(speed)
        return self._infer(split_phonemes(self._g2p.keep_known(phonemes)), voice, speed)[0]

    def _infer(self, pieces: list[str], voice: str, speed: float) -> tuple[Audio, list[Durations]]:
        """Each piece through the engine: their audio end to end, and each piece's durations."""
        audio: list[Audio] = []
        durations: list[Durations] = []
        for piece in pieces:
            ids = [self._vocab[c] for c in piece]
            started = time.perf_counter()
            pcm, frames = self._engine.infer(ids, self._voices.style(voice, len(ids)), speed)
            log.debug("%d phonemes -> %.2f s of audio in %.2f s", len(ids), len(pcm) / SAMPLE_RATE,
                      time.perf_counter() - started)
            audio.append(pcm)
            durations.append(frames)
        if not audio:
            return np.zeros(0, dtype=np.float32), []
        return np.clip(np.concatenate(audio), -1.0, 1.0).astype(np.float32, copy=False), durations

    def _check_voice(self, voice: str) -> None:
        if voice not in self._voices:
            raise UnknownVoiceError(f"unknown voice {voice!r}; known: {', '.join(self.voices())}")


def _check_speed(speed: float) -> None:
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise ValueError(f"speed must be within [{MIN_SPEED}, {MAX_SPEED}], got {speed}")


def split_phonemes(phonemes: str, limit: int = MAX_PHONEMES) -> list[str]:
    """Cut a phoneme string into pieces of at most ``limit`` symbols, at word boundaries,
    preferring the last clause end in the second half of the window."""
    pieces = []
    rest = phonemes.strip()
    while len(rest) > limit:
        cut = _cut_point(rest, limit)
        pieces.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    if rest:
        pieces.append(rest)
    return pieces


def _cut_point(text: str, limit: int) -> int:
    window = text[: limit + 1]  # a space just past the limit is a valid cut
    spaces = [i for i, c in enumerate(window) if c == " " and i > 0]
    clause_cuts = [i for i in spaces if window[i - 1] in CLAUSE_ENDS and i >= limit // 2]
    if clause_cuts:
        return clause_cuts[-1]
    if spaces:
        return spaces[-1]
    return limit  # one "word" longer than the window: no boundary to respect
