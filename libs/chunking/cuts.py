"""Where a sentence is cut into chunks: the first chunk of a cast is its first clause or phrase,
later chunks are whole sentences up to the model's window, each cut on its own (so an edit moves
no boundary outside its sentence, and a chunk made once is made again by the same sentence
anywhere). Synth cuts a chunk further while its listener's buffer is thin (synth.ramp). Cuts fall
at clause punctuation before anywhere inside a clause. Pure and deterministic, like the splitter
that uses it."""

from __future__ import annotations

import re

from .phrases import FUNCTION_WORDS, bare, phrase_ends
from .textsteps import spend

MAX_CHUNK_CHARS = 300
# The first chunk's cap (its clause or phrase is shorter still).
FIRST_CHUNK_CHARS = 80
# A cut never leaves a fragment shorter than this when a later cut point exists.
MIN_CUT_CHARS = 12
# The first chunk is the first clause: about a second of speech, so that the first audio comes
# after the model's time for one clause, not for a whole sentence. Kokoro reads English prose at
# about 16 characters per second, so a clause of 0.6 to 1.5 s has these many characters.
FIRST_CLAUSE_MIN_CHARS = 10
FIRST_CLAUSE_MAX_CHARS = 24
# No clause end in that range: the first chunk ends at the last phrase end within this many
# characters (about 1.9 s of speech), never after a function word; with none, at the last word
# boundary there (after a content word if one is).
FIRST_WORDS_CHARS = 30
# Kokoro reads English prose at about this many characters per second of speech.
SPOKEN_CHARS_PER_S = 16

_SPACE = re.compile(r"\s")
# Clause ends (kept with the head, so the model reads them with a continuing intonation), best
# first, then any white space: a cut inside a clause is the last resort.
_CLAUSES = (re.compile(r"[;:](?=\s)|；|："), re.compile(r"[,—–](?=\s)|[、，]|\s[-–—]\s"))


def next_cut(
    sentence: str, start: int, index: int, *, first_chars: int, max_chars: int, whole_first_chars: int = 0
) -> tuple[str, int]:
    """The next chunk of ``sentence[start:]`` (white space collapsed), which becomes the cast's
    chunk ``index``, and where it ends in ``sentence`` (the rest follows, past white space). A
    first sentence of at most ``whole_first_chars`` characters is not cut for speed: only, like
    any chunk, to fit ``first_chars`` (synth passes 0: its first audio is always a phrase). Later
    chunks are cut only to fit ``max_chars``. Each cut reads only the chunk's window, so cutting
    a long sentence is linear in it."""
    cap = min(first_chars, max_chars)
    if index == 0 and len(sentence) - start > whole_first_chars:
        at = _first_clause(sentence, start, cap)
    else:
        at = _cut(sentence, start, cap if index == 0 else max_chars)
    spend(at - start)
    return sentence[start:at].strip(), at


def cut_head(sentence: str, limit: int) -> tuple[str, str]:
    """A head of ``sentence`` of at most ``limit`` characters cut where a chunk would be (clause
    punctuation, else a phrase end, else a word boundary), and the rest; whole when it fits."""
    at = _cut(sentence, 0, max(limit, MIN_CUT_CHARS))
    return sentence[:at].strip(), sentence[at:].strip()


def _first_clause(sentence: str, start: int, cap: int) -> int:
    """The end of the cast's first chunk: the whole sentence when it is short, else its first
    clause of about a second, else its first phrase up to a phrase end near FIRST_WORDS_CHARS
    (before a preposition or conjunction rather than before an article or pronoun), else a shorter
    clause, else its first words up to a word boundary there: the first audio is never a long
    sentence."""
    words = min(cap, FIRST_WORDS_CHARS)
    if len(sentence) - start <= words:
        return len(sentence)
    clause = _earliest(sentence, start, _CLAUSES, FIRST_CLAUSE_MIN_CHARS, min(cap, FIRST_CLAUSE_MAX_CHARS))
    if clause:
        return clause
    ends = [(strong, end) for end, strong in phrase_ends(sentence, FIRST_CLAUSE_MIN_CHARS, words, start=start)
            if len(sentence) - end >= MIN_CUT_CHARS]
    if ends:
        return max(ends)[1]
    if at := _last_fit(sentence, start, _CLAUSES[1], 1, words) or _last_fit(sentence, start, _CLAUSES[0], 1, words):
        return at  # a short clause ("Sure, | here is …")
    if at := _first_words(sentence, start, words):
        return at
    return _cut(sentence, start, cap)  # no word boundary (a script without spaces): at its clauses


def _first_words(sentence: str, start: int, words: int) -> int:
    """The end of the last word within ``words`` characters (from ``start``) that leaves a rest of
    MIN_CUT_CHARS, preferring one after a content word (never "the | plants" when "water | the"
    is there), else the first word end past them (a very long first word); 0 when there is none.
    Reads the window and, for a very long first word, up to the first white space after it."""
    spend(words + 1)
    ends = [m.start() for m in _SPACE.finditer(sentence, start, start + words + 1)
            if len(sentence) - m.start() >= MIN_CUT_CHARS]
    near = [e for e in ends if FIRST_CLAUSE_MIN_CHARS <= e - start <= words]
    content = [e for e in near if bare(sentence[start:e].split()[-1]) not in FUNCTION_WORDS]
    if content or near:
        return max(content or near)
    if ends:
        return min(ends)
    later = _SPACE.search(sentence, start + words + 1)
    if later is None:
        return 0
    spend(later.start() - start)
    return later.start() if len(sentence) - later.start() >= MIN_CUT_CHARS else 0


def _earliest(sentence: str, start: int, patterns: tuple[re.Pattern[str], ...], low: int, high: int) -> int:
    """The end of the earliest cut point whose head (from ``start``) is ``low`` to ``high``
    characters long and leaves a rest of at least MIN_CUT_CHARS; 0 when there is none."""
    window = sentence[start : start + high + 1]
    spend(len(window) * len(patterns))
    ends = [m.end() for p in patterns for m in p.finditer(window) if low <= len(window[: m.end()].rstrip()) <= high]
    ends = [e for e in ends if len(sentence) - start - e >= MIN_CUT_CHARS]
    return start + min(ends) if ends else 0


def _cut(sentence: str, start: int, limit: int) -> int:
    """The end of a good head of ``sentence[start:]`` of at most ``limit`` characters.

    A long run is cut into pieces of about equal length (not one full piece and a stub): at
    clause punctuation between half that length and the limit if there is any, else at the last
    phrase end (see :mod:`phrases`) near that length, else at the last word boundary.
    """
    size = len(sentence) - start
    if size <= limit:
        return len(sentence)
    pieces = -(-size // limit)
    target = min(limit, -(-size // pieces) + MIN_CUT_CHARS)
    for pattern, low in ((_CLAUSES[0], target // 2), (_CLAUSES[1], target // 2), (None, target // 2),
                         (_SPACE, MIN_CUT_CHARS)):
        for bound in (target, limit):
            if pattern is None:
                ends = phrase_ends(sentence, max(low, MIN_CUT_CHARS), bound, start=start)
                at = max((e for e, _ in ends), default=0)
            else:
                at = _last_fit(sentence, start, pattern, max(low, MIN_CUT_CHARS), bound)
            if at:
                return at
    return start + limit


def _last_fit(sentence: str, start: int, pattern: re.Pattern[str], low: int, bound: int) -> int:
    """The end of the last cut point whose head (from ``start``) is at least ``low`` long and,
    stripped, fits in ``bound``; 0 when there is none. Ends grow along finditer: an end within
    the bound always fits, only one just past it (a space right at the bound) is checked."""
    at = 0
    spend(bound + 1)
    for m in pattern.finditer(sentence, start, start + bound + 1):
        e = m.end() - start
        if e >= low and (e <= bound or len(sentence[start : start + e].rstrip()) <= bound):
            at = start + e
    return at
