"""Seams heard and measured: a sentence read whole against the same sentence read with its
first-chunk cut, as the worker reads both (the same model text, the same MP3 trims).

The outside set (``OUTSIDE_SENTENCES``, sentences the project's texts never had) is what the
first-chunk cut is checked on by ear ([R:first-cut-phrase]). At the seam: the pause a listener
hears (ms), and the pitch at the end of the first chunk against the same words inside the whole
sentence (semitones; a sentence-final fall shows as a large negative number), from a plain
autocorrelation F0 estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import listening as asr
import numpy as np
import numpy.typing as npt

from chunking import Chunker

OUTSIDE_SENTENCES = (
    'The children built a castle of sand on the beach before lunch.',
    'Please remember to water the plants while we are away on holiday.',
    'Our neighbours painted their fence a bright shade of blue last week.',
    'The orchestra tuned their instruments before the concert began.',
    'The library closes early on Sundays during the summer months.',
    'My grandmother watched the birds from her kitchen window every morning.',
    'A fresh loaf of bread was waiting on the table when we arrived.',
    'Sure, here is the short version of what happened at the meeting.',
    'The meeting starts at 5 p.m. in the main hall downstairs.',
    'We flew to New York for a long weekend in the autumn.',
    'He could have finished the report if the printer had worked.',
    'The old fisherman mended his nets on the quiet harbour wall.',
)
F0_MIN_HZ, F0_MAX_HZ = 70.0, 400.0
F0_FRAME_MS, F0_HOP_MS = 40, 10
VOICED_CORRELATION = 0.5  # a frame whose normalised autocorrelation peak is lower is unvoiced
END_FRAMES = 5  # a word's end pitch: its last 50 ms of voiced frames

Pcm = npt.NDArray[np.float32]


def outside_sentences() -> list[str]:
    return list(OUTSIDE_SENTENCES)


def first_cut(sentence: str) -> list[str]:
    """The sentence as the worker reads it when the first chunk is cut (a slow model): its chunks."""
    return Chunker(whole_first_chars=0).feed(sentence, final=True)


def f0_track(pcm: Pcm, rate: int = asr.MODEL_RATE) -> npt.NDArray[np.float64]:
    """F0 in Hz per 10 ms frame (NaN where unvoiced or silent): the autocorrelation's highest
    peak between 70 and 400 Hz, normalised by the frame's energy."""
    size, hop = rate * F0_FRAME_MS // 1000, rate * F0_HOP_MS // 1000
    lo, hi = int(rate / F0_MAX_HZ), int(rate / F0_MIN_HZ)
    x = np.asarray(pcm, dtype=np.float64)
    out = np.full(max(0, (len(x) - size) // hop + 1), np.nan)
    for k in range(len(out)):
        frame = x[k * hop : k * hop + size]
        frame = frame - frame.mean()
        energy = float(np.dot(frame, frame))
        if energy < 1e-4 * size * 1e-3:  # about -60 dBFS: silence
            continue
        spectrum = np.fft.rfft(frame, 2 * size)
        ac = np.fft.irfft(spectrum * np.conj(spectrum))[: hi + 1] / energy
        lag = lo + int(np.argmax(ac[lo : hi + 1]))
        if ac[lag] >= VOICED_CORRELATION:
            out[k] = rate / lag
    return out


def end_f0(pcm: Pcm, start_ms: float, end_ms: float, frames: int = END_FRAMES) -> float:
    """The pitch at the end of a span of words (``start_ms`` to ``end_ms``; a chunk's last word
    runs into the silence after it): the median of its last ``frames`` voiced frames."""
    track = f0_track(pcm)
    span = track[int(start_ms // F0_HOP_MS) : max(int(start_ms // F0_HOP_MS) + 1, int(end_ms // F0_HOP_MS))]
    voiced = span[~np.isnan(span)][-frames:]
    return float(np.median(voiced)) if len(voiced) else float("nan")


@dataclass(frozen=True)
class Seam:
    sentence: str
    head: str
    pause_ms: int  # silence a listener hears between the first chunk and the rest
    pitch_st: float  # the end of the first chunk's last words: cut against whole, semitones
    stretch: float  # the first chunk's last word: its length cut against whole (a sentence end lengthens it)
    heard_whole: str
    heard_cut: str
    wer_whole: float
    wer_cut: float


def encoded(pcm: Pcm, *, trim_lead: bool) -> Pcm:
    """A chunk as a listener gets it: through the worker's MP3 encoder and back."""
    from mp3decode import decode_mp3

    from synth.mp3 import encode_chunk

    return np.asarray(decode_mp3(encode_chunk(pcm, trim_lead=trim_lead).data), dtype=np.float32)


def infer(synth: Any, text: str, voice: str, ahead: str = "", behind: str = "") -> tuple[Pcm, list[Any]]:
    """One chunk as the worker's dispatcher reads it (with its neighbours' words: synth.seams)."""
    from synth.dispatcher import infer as infer_one
    from synth.seams import read

    pcm, words = read(infer_one, synth, text, voice, 1.0, ahead, behind)
    return np.asarray(pcm, np.float32), words


def measure(
    synth: Any, sentence: str, voice: str = "af_heart", *, transcribe: bool = True, ahead: bool = True
) -> Seam | None:
    """Read ``sentence`` whole and with its first chunk cut, each chunk as the worker reads it
    (``ahead``: with the next words in view, see synth.seams); None when the cut leaves it whole."""
    from synth.seams import lookahead, lookbehind

    chunks = first_cut(sentence)
    if len(chunks) < 2:
        return None
    whole_pcm, whole_words = infer(synth, sentence, voice)
    head_pcm, head_words = infer(synth, chunks[0], voice, lookahead(chunks[1]) if ahead else "")
    rest = [infer(synth, c, voice, lookahead(chunks[k + 1]) if ahead and k + 1 < len(chunks) else "",
                  lookbehind(chunks[k - 1]) if ahead else "")[0] for k, c in enumerate(chunks[1:], 1)]
    # the worker trims the lead of the first chunk and of every chunk that continues a sentence
    cut = [encoded(head_pcm, trim_lead=True)] + [encoded(p, trim_lead=True) for p in rest]
    whole = encoded(whole_pcm, trim_lead=True)
    last = len(head_words) - 1  # its last two words: a function word alone is often unvoiced
    a, b = head_words[max(0, last - 1)][1], head_words[last][2]
    c, d = whole_words[max(0, last - 1)][1], whole_words[last][2]
    in_head, in_whole = end_f0(head_pcm, a, b), end_f0(whole_pcm, c, d)
    heard_whole = asr.transcribe(whole) if transcribe else ""
    heard_cut = asr.transcribe(np.concatenate(cut)) if transcribe else ""
    return Seam(
        sentence=sentence, head=chunks[0], pause_ms=asr.seam_pauses_ms(cut)[0],
        pitch_st=float(12 * np.log2(in_head / in_whole)),
        stretch=(head_words[last][2] - head_words[last][1]) / max(1, whole_words[last][2] - whole_words[last][1]),
        heard_whole=heard_whole, heard_cut=heard_cut,
        wer_whole=asr.wer(sentence, heard_whole), wer_cut=asr.wer(sentence, heard_cut),
    )


def seam_marks(seam: Seam) -> int:
    """Punctuation marks the cut's transcript has that the whole one lacks (a comma heard at the seam)."""
    marks = ",.;:!?"
    return max(0, sum(seam.heard_cut.count(m) for m in marks) - sum(seam.heard_whole.count(m) for m in marks))


def pooled_errors(seams: list[Seam]) -> tuple[int, int, int]:
    """(words misheard whole, words misheard cut, reference words) over a set."""
    n = [len(asr.words(s.sentence)) for s in seams]
    whole = sum(round(s.wer_whole * k) for s, k in zip(seams, n))
    cut = sum(round(s.wer_cut * k) for s, k in zip(seams, n))
    return whole, cut, sum(n)
