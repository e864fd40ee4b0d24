"""The one text splitter: text -> the cast's chunks (sentences, cut so none is too long).

Pure Python and deterministic: intake plans ``meta.sentences`` with it and the worker
synthesizes with it, so both always agree.
"""

from __future__ import annotations

import re

# Kokoro's window is 510 phonemes. English averages under one phoneme per character, so a
# chunk of at most this many characters fits; the worker still re-splits on phoneme overflow
# (digits, for one, expand into many words).
MAX_PHONEMES = 510
MAX_CHUNK_CHARS = 300
# A short first chunk makes the first audio arrive fast; each next chunk may be twice as long
# as the one before (up to MAX_CHUNK_CHARS), so the worker stays ahead of the listener while
# the cast's lead is still thin.
FIRST_CHUNK_CHARS = 80
# A cut never leaves a fragment shorter than this when a later cut point exists.
MIN_CUT_CHARS = 12

_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e no fig approx inc ltd co jan feb mar apr jun jul "
    "aug sep sept oct nov dec mt ft u.s u.k a.m p.m".split()
)
# A sentence ends after . ! ? … (and closing quotes or brackets) followed by white space,
# or after CJK full stops with or without space.
_END = re.compile(r"""([.!?…]+["'”’)\]]*)(?=\s)|([。！？]+[」』）]*)""")
# Where an _END match can start. Searching for these first is several times faster than
# letting _END scan: re finds a leading character class quickly, an alternation slowly.
_STOP = re.compile(r"[.!?…。！？]")
# The first character of the next word, past white space.
_NEXT_WORD = re.compile(r"\s*(\S)")
# Preferred cut points inside a long sentence, best first.
_CUTS = (re.compile(r"[;:](?=\s)|；|："), re.compile(r"[,—–](?=\s)|[、，]|\s[-–—]\s"), re.compile(r"\s"))


def split_text(
    text: str, *, max_chars: int = MAX_CHUNK_CHARS, first_chars: int = FIRST_CHUNK_CHARS
) -> list[str]:
    """Split ``text`` into chunks: never empty, never longer than ``max_chars``; chunk ``k`` at
    most ``first_chars * 2**k`` too. Dropping white space, they concatenate back to the text."""
    if max_chars < MIN_CUT_CHARS or first_chars < MIN_CUT_CHARS:
        raise ValueError(f"chunk limits must be at least {MIN_CUT_CHARS} characters")
    chunks: list[str] = []
    for sentence in _sentences(text):
        while sentence:
            limit = _limit(len(chunks), first_chars, max_chars)
            head, sentence = _cut(sentence, limit)
            chunks.append(head)
    return chunks


def _limit(index: int, first_chars: int, max_chars: int) -> int:
    if index == 0:
        return first_chars
    return min(max_chars, first_chars << min(index, 16))


def count_chunks(text: str) -> int:
    return len(split_text(text))


def _sentences(text: str) -> list[str]:
    """The text's sentences, white space collapsed. Linear in the text: no step copies the rest
    of a line (a book chapter pasted as one line is a single line of 100 000 characters)."""
    out: list[str] = []
    stop_at, end_at, next_word, abbreviation = _STOP.search, _END.match, _NEXT_WORD.match, _is_abbreviation
    for line in text.splitlines():
        start = pos = 0
        while (stop := stop_at(line, pos)) is not None:
            dot = stop.start()
            m = end_at(line, dot)
            if m is None:  # e.g. "3.14" or "e.g.x": not followed by white space
                pos = dot + 1
                continue
            pos = m.end()
            if m.group(1):
                if line[dot] == "." and abbreviation(line, dot):
                    continue
                # a lower-case word after the stop ("Wait... what?") continues the sentence
                word = next_word(line, pos)
                if word is not None and word.group(1).islower():
                    continue
            out.append(line[start:pos])
            start = pos
        out.append(line[start:])
    return [s for s in (" ".join(s.split()) for s in out) if s]


def _is_abbreviation(line: str, dot: int) -> bool:
    """Whether the word before the full stop at ``dot`` is an abbreviation or an initial."""
    # the word before the stop, found without copying the line (long paragraphs stay linear)
    start = max(line.rfind(" ", 0, dot), line.rfind("\t", 0, dot)) + 1
    word = line[start:dot].lower().lstrip("\"'“‘([")
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def _cut(sentence: str, limit: int) -> tuple[str, str]:
    """A good head of at most ``limit`` characters, and the rest.

    A long run is cut into pieces of about equal length (not one full piece and a stub), at
    the best kind of cut point found near that length.
    """
    if len(sentence) <= limit:
        return sentence, ""
    pieces = -(-len(sentence) // limit)
    target = min(limit, -(-len(sentence) // pieces) + MIN_CUT_CHARS)
    for bound in (target, limit):
        window = sentence[: bound + 1]  # a space right after the bound is a fine cut too
        for pattern in _CUTS:
            # The last cut point whose head, stripped, fits; ends grow along finditer. An end
            # within the bound always fits; only one just past it (a space at the bound) is checked.
            at = 0
            for m in pattern.finditer(window):
                e = m.end()
                if e >= MIN_CUT_CHARS and (e <= bound or len(sentence[:e].rstrip()) <= bound):
                    at = e
            if at:
                return sentence[:at].strip(), sentence[at:].strip()
    return sentence[:limit].strip(), sentence[limit:].strip()
