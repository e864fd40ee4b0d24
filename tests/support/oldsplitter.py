"""The splitter as it was before it ran in linear time (quadratic on a run of stops, a long
sentence or a long word), kept as the reference its replacement must agree with on every text of
a bounded size. Only the algorithm is copied; word lists and limits come from castlog, so a change
there moves both."""

from __future__ import annotations

import re

from chunking.cuts import (
    _CLAUSES,
    _SPACE,
    FIRST_CHUNK_CHARS,
    FIRST_CLAUSE_MAX_CHARS,
    FIRST_CLAUSE_MIN_CHARS,
    FIRST_WORDS_CHARS,
    MAX_CHUNK_CHARS,
    MIN_CUT_CHARS,
)
from chunking.phrases import _ENGLISH, FUNCTION_WORDS, STRONG_OPENERS, WEAK_OPENERS
from chunking.splitter import (  # how a word before a stop is judged did not change: only finding it
    _LINE_BREAK,
    _NEXT_LETTERS,
    _NEXT_WORD,
    _RUN,
    _STOP,
    _kind_of,
    _word_continues,
)

_END = re.compile(r"""([.!?…]+["'”’)\]]*)(?=\s)|([。！？]+[」』）]*)""")
_WORD = re.compile(r"\S+")
_BARE = re.compile(r"^[\"'“‘(\[]*(.*?)[\"'”’)\].,;:!?…]*$")


def split_text(text: str, *, max_chars: int = MAX_CHUNK_CHARS, first_chars: int = FIRST_CHUNK_CHARS,
               whole_first_chars: int = 0) -> list[str]:
    return OldChunker(max_chars=max_chars, first_chars=first_chars,
                      whole_first_chars=whole_first_chars).feed(text, final=True)


class OldChunker:
    def __init__(self, *, max_chars: int = MAX_CHUNK_CHARS, first_chars: int = FIRST_CHUNK_CHARS,
                 whole_first_chars: int = 0) -> None:
        self._max_chars, self._first_chars = max_chars, first_chars
        self._whole_first_chars = whole_first_chars
        self._buf = ""
        self._pos = 0
        self._count = 0
        self._out: list[str] = []
        self.continued: list[bool] = []

    def feed(self, text: str, *, final: bool = False) -> list[str]:
        old = len(self._buf)
        buf = self._buf = self._buf + text
        start = 0
        for brk in _LINE_BREAK.finditer(buf, old):
            start = self._scan(start, brk.start(), final=True)
            start = self._pos = brk.end()
        start = self._scan(start, len(buf), final=final)
        self._buf, self._pos = buf[start:], self._pos - start
        out, self._out = self._out, []
        return out

    def flush(self) -> list[str]:
        return self.feed("", final=True)

    def _scan(self, start: int, end: int, *, final: bool) -> int:
        buf, pos = self._buf, max(self._pos, start)
        while (stop := _STOP.search(buf, pos, end)) is not None:
            dot = stop.start()
            if not final and not _decided(buf, start, dot, end):
                pos = dot
                break
            m = _END.match(buf, dot, end)
            if m is None:
                pos = dot + 1
                continue
            pos = m.end()
            if m.group(1):
                if buf[dot] == "." and _abbreviation_continues(buf, start, dot, pos, end):
                    continue
                word = _NEXT_WORD.match(buf, pos, end)
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
        sentence = " ".join(text.split())
        continues = False
        while sentence:
            head, sentence = cut_sentence(sentence, self._count, first_chars=self._first_chars,
                                          max_chars=self._max_chars, whole_first_chars=self._whole_first_chars)
            self._out.append(head)
            self.continued.append(continues)
            self._count += 1
            continues = True


def _decided(buf: str, start: int, dot: int, end: int) -> bool:
    after = _RUN.match(buf, dot, end).end()  # type: ignore[union-attr]
    if after == end:
        return False
    if not buf[after].isspace():
        return True
    if _NEXT_WORD.match(buf, after, end) is None:
        return False
    if buf[dot] == "." and _kind_of_word_before(buf, start, dot) == "initialism":
        word = _NEXT_LETTERS.match(buf, after, end)
        return word is None or word.end() < end
    return True


def _abbreviation_continues(buf: str, start: int, dot: int, after: int, end: int) -> bool:
    return _word_continues(_word_before(buf, start, dot), buf, after, end)


def _kind_of_word_before(buf: str, start: int, dot: int) -> str:
    return _kind_of(_word_before(buf, start, dot))


def _word_before(buf: str, start: int, dot: int) -> str:
    begin = max(buf.rfind(" ", start, dot), buf.rfind("\t", start, dot), start - 1) + 1
    return buf[begin:dot].lower().lstrip("\"'“‘([")


def bare(token: str) -> str:
    m = _BARE.match(token)
    return (m.group(1) if m else token).lower().replace("’", "'")


def ends_phrase(before: str, after: str, *, first: bool) -> bool:
    word, nxt = bare(before), bare(after)
    if not _ENGLISH.fullmatch(word) or not _ENGLISH.fullmatch(nxt):
        return False
    if word in FUNCTION_WORDS or nxt not in STRONG_OPENERS | WEAK_OPENERS:
        return False
    if before[-1:] in "-–—":
        return False
    return not (not first and before[:1].isupper() and after[:1].isupper())


def phrase_ends(sentence: str, low: int, high: int) -> list[tuple[int, bool]]:
    tokens = [(m.start(), m.end(), m.group(0)) for m in _WORD.finditer(sentence)]
    out = []
    for k in range(len(tokens) - 1):
        _, end, before = tokens[k]
        after = tokens[k + 1][2]
        if low <= end <= high and ends_phrase(before, after, first=k == 0):
            out.append((end, bare(after) in STRONG_OPENERS))
    return out


def cut_sentence(sentence: str, index: int, *, first_chars: int, max_chars: int,
                 whole_first_chars: int = 0) -> tuple[str, str]:
    cap = min(first_chars, max_chars)
    if index == 0 and len(sentence) > whole_first_chars:
        return _first_clause(sentence, cap)
    return _cut(sentence, cap if index == 0 else max_chars)


def _first_clause(sentence: str, cap: int) -> tuple[str, str]:
    words = min(cap, FIRST_WORDS_CHARS)
    if len(sentence) <= words:
        return sentence, ""
    clause = _earliest(sentence, _CLAUSES, FIRST_CLAUSE_MIN_CHARS, min(cap, FIRST_CLAUSE_MAX_CHARS))
    if clause:
        return sentence[:clause].strip(), sentence[clause:].strip()
    ends = [(strong, end) for end, strong in phrase_ends(sentence, FIRST_CLAUSE_MIN_CHARS, words)
            if len(sentence) - end >= MIN_CUT_CHARS]
    if ends:
        end = max(ends)[1]
        return sentence[:end].strip(), sentence[end:].strip()
    if at := _last_fit(sentence, _CLAUSES[1], 1, words) or _last_fit(sentence, _CLAUSES[0], 1, words):
        return sentence[:at].strip(), sentence[at:].strip()
    if at := _first_words(sentence, words):
        return sentence[:at].strip(), sentence[at:].strip()
    return _cut(sentence, cap)


def _first_words(sentence: str, words: int) -> int:
    ends = [m.start() for m in _SPACE.finditer(sentence) if len(sentence) - m.start() >= MIN_CUT_CHARS]
    near = [e for e in ends if FIRST_CLAUSE_MIN_CHARS <= e <= words]
    content = [e for e in near if bare(sentence[:e].split()[-1]) not in FUNCTION_WORDS]
    return max(content or near, default=min(ends, default=0))


def _earliest(sentence: str, patterns: tuple[re.Pattern[str], ...], low: int, high: int) -> int:
    window = sentence[: high + 1]
    ends = [m.end() for p in patterns for m in p.finditer(window) if low <= len(window[: m.end()].rstrip()) <= high]
    ends = [e for e in ends if len(sentence) - e >= MIN_CUT_CHARS]
    return min(ends, default=0)


def _cut(sentence: str, limit: int) -> tuple[str, str]:
    if len(sentence) <= limit:
        return sentence, ""
    pieces = -(-len(sentence) // limit)
    target = min(limit, -(-len(sentence) // pieces) + MIN_CUT_CHARS)
    for pattern, low in ((_CLAUSES[0], target // 2), (_CLAUSES[1], target // 2), (None, target // 2),
                         (_SPACE, MIN_CUT_CHARS)):
        for bound in (target, limit):
            if pattern is None:
                at = max((e for e, _ in phrase_ends(sentence, max(low, MIN_CUT_CHARS), bound)), default=0)
            else:
                at = _last_fit(sentence, pattern, max(low, MIN_CUT_CHARS), bound)
            if at:
                return sentence[:at].strip(), sentence[at:].strip()
    return sentence[:limit].strip(), sentence[limit:].strip()


def _last_fit(sentence: str, pattern: re.Pattern[str], low: int, bound: int) -> int:
    at = 0
    for m in pattern.finditer(sentence, 0, bound + 1):
        e = m.end()
        if e >= low and (e <= bound or len(sentence[:e].rstrip()) <= bound):
            at = e
    return at
