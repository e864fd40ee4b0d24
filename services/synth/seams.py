"""A seam inside a sentence: each chunk is read with its neighbours' words in view and its audio
cut where its own words begin and end, so that the seam sounds like the breath a reader takes
there, not like a sentence's end and a new sentence's start [R:seam-continues].

Read alone, "The children built a castle" ends as a statement: the model lengthens the last word
several-fold and lets the pitch fall, and Whisper hears a comma or a full stop at the seam. Read
as "The children built a castle of sand", the same words keep the prosody they have inside the
whole sentence, and the audio is cut where "of" begins (the model's word timings). Two words
ahead, because one misled Whisper on some voices and more cost first audio: this is on its
path. The next chunk is read as "built a castle of sand on the beach before lunch." and its audio
starts where "castle" ends. Without word timings (a stand-in model), or when the timings do not
line up with the text, the chunk is read alone, as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from castlog import SAMPLE_RATE

from .model import Audio, Synthesizer
from .model.normalize import normalize_english
from .model.timing import Word

# Words of the next chunk read with a chunk that the sentence goes on after (on the first
# audio's path: kept short), and of the chunk before read with one that goes on with it.
LOOKAHEAD_WORDS = 2
LOOKBEHIND_WORDS = 3
Infer = Callable[[Synthesizer, str, str, float], tuple[Audio, list[Word]]]
_LETTERS = re.compile(r"[\W_]+")
# Text the context applies to: Latin letters and punctuation (the word timings of other
# scripts are not spelled word for word like the text).
_LATIN = re.compile(r"[\x00-\u024f\u2000-\u206f]*")


def lookahead(next_chunk: str) -> str:
    """The words of the next chunk read with this one."""
    return " ".join(next_chunk.split()[:LOOKAHEAD_WORDS])


def lookbehind(chunk_before: str) -> str:
    """The words of the chunk before read with this one."""
    return " ".join(chunk_before.split()[-LOOKBEHIND_WORDS:])


def in_view(synth: Synthesizer, text: str) -> bool:
    """Whether the model reads ``text`` with its neighbours' words: it times its words, and the
    text is of a script whose timings spell it word for word."""
    return getattr(synth, "synthesize_timed", None) is not None and _LATIN.fullmatch(text) is not None


def read_text(synth: Synthesizer, text: str, ahead: str, behind: str = "") -> str:
    """What the model reads for ``text``: with ``behind`` and ``ahead`` where they are in view."""
    if (ahead or behind) and in_view(synth, f"{behind}{text}{ahead}"):
        return " ".join(p for p in (behind, text, ahead) if p)
    return text


def read(
    infer: Infer, synth: Synthesizer, text: str, voice: str, speed: float, ahead: str, behind: str = "",
    *, seen: str | None = None,
) -> tuple[Audio, list[Word]]:
    """``text`` through the model (``infer``, on the model thread), with ``behind`` and
    ``ahead`` in view when the model times its words: the audio and words of ``text`` alone.
    ``seen``: :func:`read_text`'s answer, when the caller has it already."""
    seen = read_text(synth, text, ahead, behind) if seen is None else seen
    if seen != text:
        pcm, words = infer(synth, seen, voice, speed)
        first = words_of(words, behind) if behind else 0
        n = None if first is None else words_of(words[first:], text)
        if first is not None and n is not None and first < len(words) and (not ahead or first + n < len(words)):
            start_ms = words[first - 1][2] if behind else 0  # from the end of the word before: its onset whole
            end = round(words[first + n][1] * SAMPLE_RATE / 1000) if ahead else len(pcm)
            own = [(w, a - start_ms, b - start_ms) for w, a, b in words[first : first + n]]
            return pcm[round(start_ms * SAMPLE_RATE / 1000) : end], own
    return infer(synth, text, voice, speed)


def words_of(words: Sequence[Word], text: str) -> int | None:
    """How many of the model's ``words`` spell ``text`` as written or as read out ("5 p.m." is
    "five p.m."), letters and digits compared; None when they do not line up with it."""
    as_written = _count(words, _LETTERS.sub("", text).lower())
    if as_written is not None:  # the usual case: no second normalisation of the chunk
        return as_written
    return _count(words, _LETTERS.sub("", normalize_english(text)).lower())


def _count(words: Sequence[Word], want: str) -> int | None:
    got = ""
    for k, (word, _, _) in enumerate(words):
        if got == want:
            return k
        got += _LETTERS.sub("", word).lower()
        if not want.startswith(got):
            return None
    return len(words) if got == want else None
