"""Text rewritten by regular expressions, remembering where each character came from.

Normalisation turns "**1999**" into "nineteen ninety-nine"; the words the model speaks must still
be shown against what the client sent. A ``Mapped`` text carries, for every character, the span
of the original it stands for: a kept character its own, an inserted one the whole match's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# What a rule makes of a match: pieces of inserted text, or (start, end) spans of the text it matched in
Edit = Callable[["re.Match[str]"], "Sequence[str | tuple[int, int]]"]


@dataclass(frozen=True)
class Mapped:
    """``text``, and for each of its characters the [start, end) of the original it stands for."""

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    @classmethod
    def of(cls, text: str) -> Mapped:
        return cls(text, tuple(range(len(text))), tuple(range(1, len(text) + 1)))

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original's span behind ``text[start:end]``."""
        if start >= end:
            at = self.starts[start] if start < len(self.starts) else (self.ends[-1] if self.ends else 0)
            return at, at
        return min(self.starts[start:end]), max(self.ends[start:end])

    def sub(self, pattern: re.Pattern[str], edit: Edit) -> Mapped:
        """Every match of ``pattern`` replaced by the pieces ``edit`` returns for it."""
        if pattern.search(self.text) is None:  # most rules match nothing in a chunk: no new map
            return self
        text: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        cursor = 0
        for m in pattern.finditer(self.text):
            self._keep(cursor, m.start(), text, starts, ends)
            whole = self.span(m.start(), m.end())
            for piece in edit(m):
                if isinstance(piece, str):
                    text.append(piece)
                    starts.extend([whole[0]] * len(piece))
                    ends.extend([whole[1]] * len(piece))
                else:
                    self._keep(piece[0], piece[1], text, starts, ends)
            cursor = m.end()
        self._keep(cursor, len(self.text), text, starts, ends)
        return Mapped("".join(text), tuple(starts), tuple(ends))

    def replace(self, pattern: re.Pattern[str], words: Callable[[re.Match[str]], str]) -> Mapped:
        """Each match replaced by a string (that stands for all of the match)."""
        return self.sub(pattern, lambda m: (words(m),))

    def _keep(self, start: int, end: int, text: list[str], starts: list[int], ends: list[int]) -> None:
        if end > start:
            text.append(self.text[start:end])
            starts.extend(self.starts[start:end])
            ends.extend(self.ends[start:end])


def keep_group(name: str) -> Edit:
    """An edit that keeps only group ``name`` of the match."""

    def edit(m: re.Match[str]) -> Sequence[str | tuple[int, int]]:
        return [m.span(name)] if m.group(name) is not None else []

    return edit


def drop(m: re.Match[str]) -> Sequence[str | tuple[int, int]]:
    return ()


def translate(mapped: Mapped, table: dict[str, str]) -> Mapped:
    """str.translate for a Mapped text: each listed character becomes its replacement."""
    pattern = re.compile("[" + "".join(re.escape(c) for c in table) + "]")
    return mapped.replace(pattern, lambda m: table[m.group(0)])
