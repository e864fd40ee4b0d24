"""Word timings from the model's predicted durations.

The model gives every input token (one phoneme symbol, or a space) a whole number of frames of
600 samples (25 ms at 24 kHz); its audio is exactly those frames laid end to end, the start
and end pads included. A word's time is the span of its phonemes, found in the phoneme string
that was synthesized by walking the G2P's words through it in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from castlog import SAMPLE_RATE

from .base import Durations, Word

FRAME_SAMPLES = 600
FRAME_MS = FRAME_SAMPLES * 1000 / SAMPLE_RATE
Span = tuple[float, float]


def symbol_times(pieces: Sequence[str], durations: Sequence[Durations]) -> list[Span]:
    """(start, end) in ms of each symbol of ``" ".join(pieces)``: each piece was inferred alone
    and their audio concatenated; the space a cut removed lasts nothing."""
    times: list[Span] = []
    offset = 0.0
    for k, (piece, frames) in enumerate(zip(pieces, durations)):
        if k:
            times.append((offset, offset))
        ends = np.cumsum(frames) * FRAME_MS  # ends[0]: the start pad; ends[j + 1]: symbol j
        times.extend((offset + ends[j], offset + ends[j + 1]) for j in range(len(piece)))
        offset += float(ends[-1])
    return times


def locate(words: Sequence[tuple[str, str]], phonemes: str, keep: Callable[[str], str]) -> list[tuple[str, int, int]]:
    """(word, index of its first symbol, of its last) for each word of ``words`` (text and its
    phonemes, in order) found in ``phonemes``; punctuation tokens are passed over, not listed.
    Stops at the first word whose phonemes are not where they should be."""
    out: list[tuple[str, int, int]] = []
    cursor = 0
    for text, word_phonemes in words:
        wanted = [c for c in keep(word_phonemes) if not c.isspace()]
        if not wanted:
            continue
        found = []
        for c in wanted:
            while cursor < len(phonemes) and phonemes[cursor] != c and phonemes[cursor].isspace():
                cursor += 1
            if cursor >= len(phonemes) or phonemes[cursor] != c:
                return out
            found.append(cursor)
            cursor += 1
        if any(ch.isalnum() for ch in text):
            out.append((text, found[0], found[-1]))
    return out


def spaced_words(text: str, phonemes: str) -> list[tuple[str, str]]:
    """Words for a G2P that gives no tokens: the text's and the phonemes' space-separated words,
    paired when they are as many (else none)."""
    written, spoken = text.split(), phonemes.split()
    return list(zip(written, spoken)) if len(written) == len(spoken) else []


def word_times(words: Sequence[tuple[str, str]], pieces: Sequence[str], durations: Sequence[Durations],
               keep: Callable[[str], str]) -> list[Word]:
    phonemes = " ".join(pieces)
    times = symbol_times(pieces, durations)
    return [(text, round(times[a][0]), round(times[b][1])) for text, a, b in locate(words, phonemes, keep)]
