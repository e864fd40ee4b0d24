"""The one text splitter: text -> the cast's chunks (sentences, cut so none is too long).

Pure Python and deterministic: intake plans ``meta.sentences`` with it and the worker
synthesizes with it, so both always agree.
"""

from __future__ import annotations

import re

from .cuts import FIRST_CHUNK_CHARS, MAX_CHUNK_CHARS, MIN_CUT_CHARS, next_cut
from .textsteps import spend

# Kokoro's window is 510 phonemes. English averages under one phoneme per character, so a
# chunk of at most MAX_CHUNK_CHARS characters fits; the worker still re-splits on phoneme
# overflow (digits, for one, expand into many words).
MAX_PHONEMES = 510

# A full stop after these never ends a sentence ("Dr. Brown", "e.g. The Beatles").
_TITLES = frozenset(
    "mr mrs ms dr prof sr jr st vs e.g i.e no fig approx jan feb mar apr jun jul aug sep sept oct nov dec mt ft".split()
)
# After these the stop is also the sentence's ("in the U.S. Then", "apples, etc. They") when a
# word that opens sentences follows; after a time ("at 5 p.m. Bring") any capitalised word.
_TIMES = frozenset({"a.m", "p.m"})
_ENDINGS = frozenset("etc inc ltd co".split())
_INITIALISM = re.compile(r"(?:[a-z]\.)+[a-z]")  # u.s, u.k, u.s.a, d.c (lower-cased)
_OPENERS = frozenset(
    "i he she it we they you the a an this that these those there then but and so yet now here in on at as "
    "if when while after before our my his her its their your what why how who where however meanwhile "
    "later today tomorrow yesterday".split()
)
# The next word after a stop, when it starts with a letter.
_NEXT_LETTERS = re.compile(r"\s*([^\W\d_]+)[\w'’]*")
# A sentence ends after . ! ? … (and closing quotes or brackets) followed by white space,
# or after CJK full stops with or without space. Each run is matched once from its first stop
# (matching it again from every stop of a run of 16 000 was quadratic).
_LATIN_STOPS = re.compile(r"[.!?…]+")
_LATIN_CLOSERS = re.compile(r"""["'”’)\]]*""")
_CJK_END = re.compile(r"[。！？]+[」』）]*")
# Where a sentence's end can start.
_STOP = re.compile(r"[.!?…。！？]")
# A stop's run with its closing quotes and brackets: what decides a stop is the character after it.
_RUN = re.compile(r"""[.!?…。！？]+["'”’)\]」』）]*""")
# How a run read up to the end of the text so far goes on when more comes (a live cast fed a run
# of stops piece by piece reads each piece once): more stops and closers after a stop, more
# closers after a closer.
_RUN_AFTER_STOP = re.compile(r"""[.!?…。！？]*["'”’)\]」』）]*""")
_RUN_AFTER_CLOSER = re.compile(r"""["'”’)\]」』）]*""")
_STOPS = ".!?…。！？"
# Line breaks as str.splitlines sees them; a line break ends a sentence.
_LINE_BREAK = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
# The first character of the next word, past white space.
_NEXT_WORD = re.compile(r"\s*(\S)")


def split_text(
    text: str, *, max_chars: int = MAX_CHUNK_CHARS, first_chars: int = FIRST_CHUNK_CHARS
) -> list[str]:
    """Split ``text`` into chunks: never empty, never longer than ``max_chars``; chunk ``k`` at
    most ``first_chars * 2**k`` too. Dropping white space, they concatenate back to the text.

    The same as feeding ``text`` to a :class:`Chunker` in any pieces and then flushing it."""
    return Chunker(max_chars=max_chars, first_chars=first_chars).feed(text, final=True)


def count_chunks(text: str) -> int:
    return len(split_text(text))


class Chunker:
    """The splitter, fed text as it arrives (a live cast) instead of all at once.

    ``feed(text)`` takes the next piece of text and returns the chunks it completed;
    ``flush()`` returns the chunks of whatever is still pending. A sentence is complete once its
    stop *and the next non-space character* have arrived (that character decides whether the
    stop ends the sentence: "Wait... what?" does not; after an initialism it waits for the whole
    next word: "U.S. Then" ends a sentence, "U.S. Army" does not), or at a line break, or at
    ``flush()``.
    Chunks come out in order and are numbered by the chunker across all calls (the first one is
    the short first chunk, then the ramp), so::

        c = Chunker(); c.feed(a) + c.feed(b) + c.flush() == split_text(a + b)

    for any cut of the text into pieces. ``whole_first_chars``: a first sentence this short goes
    whole (the model reads it within the first-audio target), not cut at its first clause or phrase. ``flush()`` ends the pending sentence as a line break
    would; feeding may go on after it (the chunk numbering, and so the ramp, continues), so
    ``feed(a) + flush() + feed(b) + flush() == split_text(a + "\n" + b)``. ``continued`` says,
    for each chunk returned, whether it goes on with the sentence of the chunk before it.
    """

    def __init__(
        self, *, max_chars: int = MAX_CHUNK_CHARS, first_chars: int = FIRST_CHUNK_CHARS, whole_first_chars: int = 0
    ) -> None:
        if max_chars < MIN_CUT_CHARS or first_chars < MIN_CUT_CHARS:
            raise ValueError(f"chunk limits must be at least {MIN_CUT_CHARS} characters")
        self._max_chars, self._first_chars = max_chars, first_chars
        self._whole_first_chars = whole_first_chars  # see cuts.next_cut
        # The text fed but not yet in a returned chunk: the unfinished sentence (and nothing before
        # it), the current line's rest.
        self.pending = ""
        self._pos = 0  # where the search for its stop goes on in pending (nothing before is undecided)
        self._run_end = 0  # the end of the run of stops last read in pending (_RUN): read on, not again
        self.count = 0  # the chunks returned so far
        self._out: list[str] = []
        # For every chunk returned so far, in order: whether it continues the sentence of the chunk
        # before it (the cut between them is inside a sentence: the seam must not sound like an end).
        self.continued: list[bool] = []

    def feed(self, text: str, *, final: bool = False) -> list[str]:
        """Take the next piece of the text; return the chunks that are now complete.
        ``feed(text, final=True)`` is ``feed(text) + flush()``."""
        old = len(self.pending)
        buf = self.pending = self.pending + text
        start = 0
        for brk in _LINE_BREAK.finditer(buf, old):
            start = self._scan(start, brk.start(), final=True)
            start = self._pos = brk.end()
        start = self._scan(start, len(buf), final=final)
        self.pending, self._pos = buf[start:], self._pos - start
        self._run_end = max(self._run_end - start, 0)
        out, self._out = self._out, []
        return out

    def flush(self) -> list[str]:
        """Return the chunks of all the pending text (it ends as at a line break)."""
        return self.feed("", final=True)

    def _scan(self, start: int, end: int, *, final: bool) -> int:
        """Complete the sentences of ``pending[start:end]``, a line's unfinished part (``final``: the
        line has ended); return where the unfinished sentence now starts. Linear in the text: no
        step copies the rest of a line (a book chapter pasted as one line is one line of 100 000
        characters), and each run of stops is read once."""
        buf, pos = self.pending, max(self._pos, start)
        while (stop := _STOP.search(buf, pos, end)) is not None:
            dot = stop.start()
            spend(dot - pos + 1)
            if not final:
                run_end = self._run_end = _run_end(buf, dot, self._run_end, end)
                if not _decided(buf, start, dot, run_end, end):
                    pos = dot  # look at this stop again once more text has come
                    break
            latin, after = _sentence_end(buf, dot, end)
            if after < 0:  # e.g. "3.14" or "e.g.x": not followed by white space
                pos = -after  # nor is any later stop of this run
                continue
            pos = after
            if latin:
                # a full stop of an abbreviation that does not end the sentence
                if buf[dot] == "." and _word_continues(_word_before(buf, start, dot), buf, pos, end):
                    continue
                # a lower-case word after the stop ("Wait... what?") continues the sentence
                word = _NEXT_WORD.match(buf, pos, end)
                spend(word.end() - pos if word else end - pos)
                if word is not None and word.group(1).islower():
                    continue
            self._sentence(buf[start:pos])
            start = pos
        else:
            pos = end
        if final:
            self._sentence(buf[start:end])
            start = end
        self._pos = pos
        return start

    def _sentence(self, text: str) -> None:
        spend(len(text))
        sentence = " ".join(text.split())
        continues = False
        at = 0
        while at < len(sentence):
            head, at = next_cut(
                sentence, at, self.count, first_chars=self._first_chars, max_chars=self._max_chars,
                whole_first_chars=self._whole_first_chars,
            )
            at += sentence.startswith(" ", at)  # the rest starts past the space (collapsed: one)
            self._out.append(head)
            self.continued.append(continues)
            self.count += 1
            continues = True


def _run_end(buf: str, dot: int, known: int, end: int) -> int:
    """Where the run of stops and closers (``_RUN``) at ``dot`` ends, given that the run last
    read ended at ``known``: a stop inside that run shares its end, read on from there only."""
    if dot >= known:
        after = _RUN.match(buf, dot, end).end()  # type: ignore[union-attr]  # a stop is at dot
        spend(after - dot)
        return after
    more = _RUN_AFTER_STOP if buf[known - 1] in _STOPS else _RUN_AFTER_CLOSER
    after = more.match(buf, known, end).end()  # type: ignore[union-attr]  # matches empty
    spend(after - known + 1)
    return after


def _sentence_end(buf: str, dot: int, end: int) -> tuple[bool, int]:
    """Whether the stop at ``dot`` is a Latin one, and where the sentence it may end ends: past
    the stops and closing quotes or brackets when white space follows them (Latin), or past the
    stops and closers (CJK). Negative when it ends none: then minus where the run of Latin stops
    ends, since no later stop of the run ends one either (each has the same closers after it)."""
    if buf[dot] in "。！？":
        after = _CJK_END.match(buf, dot, end).end()  # type: ignore[union-attr]  # a CJK stop is at dot
        spend(after - dot)
        return False, after
    stops = _LATIN_STOPS.match(buf, dot, end).end()  # type: ignore[union-attr]  # a Latin stop is at dot
    after = _LATIN_CLOSERS.match(buf, stops, end).end()  # type: ignore[union-attr]  # matches empty
    spend(after - dot + 1)
    if after < end and buf[after].isspace():
        return True, after
    return True, -stops


def _decided(buf: str, start: int, dot: int, after: int, end: int) -> bool:
    """Whether the stop at ``dot`` can be judged from ``buf[:end]`` alone: the characters after
    its run of stops and closers (which ends at ``after``) are there, up to the next word if
    white space comes first (the whole next word after an initialism: "U.S. Then" ends a
    sentence, "U.S. Army" does not)."""
    if after == end:
        return False
    if not buf[after].isspace():
        return True
    if _NEXT_WORD.match(buf, after, end) is None:
        return False
    if buf[dot] == "." and _kind_of(_word_before(buf, start, dot)) == "initialism":
        word = _NEXT_LETTERS.match(buf, after, end)
        return word is None or word.end() < end
    return True


def _word_continues(before: str, buf: str, after: int, end: int) -> bool:
    """Whether a full stop after the word ``before`` (see _word_before) continues the sentence,
    given the text after the stop's run."""
    kind = _kind_of(before)
    if kind != "initialism":
        return kind == "title"
    word = _NEXT_LETTERS.match(buf, after, end)
    if word is None or not word.group(1)[0].isupper():
        return True
    return before not in _TIMES and word.group(1).lower() not in _OPENERS


def _kind_of(word: str) -> str:
    """"title" (never ends a sentence), "initialism" (ends one before some words), or ""."""
    if word in _TITLES or (len(word) == 1 and word.isalpha()):
        return "title"
    if word in _TIMES or word in _ENDINGS or _INITIALISM.fullmatch(word):
        return "initialism"
    return ""


def _word_before(buf: str, start: int, dot: int) -> str:
    """The word before the full stop at ``dot``, lower-cased, without opening quotes. It begins
    after a space or tab or at the sentence's ``start`` (found without copying the line).

    Read back only to the nearest white space of any kind: a word holding other white space
    (a no-break space) is no abbreviation, and "" says so. Reading on to a space instead was
    quadratic on "Mr.\u00a0" repeated; now each stop reads only its own stretch of text."""
    begin = dot
    while begin > start and not buf[begin - 1].isspace():
        begin -= 1
    spend(dot - begin + 1)
    if begin > start and buf[begin - 1] not in " \t":
        return ""
    return buf[begin:dot].lower().lstrip("\"'“‘([")
