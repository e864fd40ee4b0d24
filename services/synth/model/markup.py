"""Text as an LLM writes it -> text to read out: markdown marks, HTML tags and emoji go.

Runs before any language's G2P (the marks mean nothing in any language): emphasis, headings,
list markers, quotes, rules, tables, code spans and fences go and their words stay; a link is
read as its text, an image as its alt text. Headings and list items end in a full stop when they
have none, so they are read as lines, not run together. Every edit keeps the offset map
(``Mapped``), so words still point at what the client sent. English words for URLs, e-mail
addresses and symbols are ``normalize``'s job.
"""

from __future__ import annotations

import re

from .mapped import Mapped, drop, keep_group

_M = re.MULTILINE
_ENDS_CLAUSE = ".,;:!?\u2026\u3002\uff01\uff1f"


def _line(m: re.Match[str]) -> list[str | tuple[int, int]]:
    """A heading or list item: its words, and a full stop unless it ends a clause already."""
    words = m.group("k")
    if not words.strip():
        return []
    return [m.span("k")] + ([] if words.rstrip()[-1] in _ENDS_CLAUSE else ["."])


_RULES = [
    (re.compile(r"[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\uFE0F\u200D\u20E3]+"), drop),  # emoji
    (re.compile(r"^[ \t]*(?:```|~~~)[^\n]*$", _M), drop),  # code fences (the code is read)
    (re.compile(r"^[ \t]*([-*_])(?:[ \t]*\1){2,}[ \t]*$", _M), drop),  # horizontal rules
    (re.compile(r"^[ \t]*\|?(?:[ \t]*:?-{3,}:?[ \t]*\|)+(?:[ \t]*:?-{3,}:?[ \t]*)?$", _M), drop),  # table rules
    (re.compile(r"!\[(?P<k>[^\]\n]*)\]\([^)\n]*\)"), keep_group("k")),  # images: the alt text
    (re.compile(r"\[(?P<k>[^\]\n]+)\](?:\([^)\n]*\)|\[[^\]\n]*\])"), keep_group("k")),  # links: the text
    (re.compile(r"<(?P<k>(?:https?://|mailto:)[^>\s]+)>"), keep_group("k")),  # autolinks
    (re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>\n]*)?/?>"), drop),  # HTML tags
    (re.compile(r"^[ \t]*(?:>[ \t]?)+", _M), drop),  # block quotes
    (re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(?P<k>[^\n]*?)[ \t#]*$", _M), _line),  # headings
    (re.compile(r"^[ \t]*(?:[-*+\u2022]|\d{1,3}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?(?P<k>[^\n]*?)[ \t]*$", _M),
     _line),  # list items (and task boxes)
    (re.compile(r"\\(?P<k>[\\`*_{}\[\]()#+\-.!|~<>])"), keep_group("k")),  # escapes
    (re.compile(r"(?P<f>`+)(?P<k>.+?)(?P=f)"), keep_group("k")),  # code spans
    (re.compile(r"(?P<f>\*{1,3})(?=\S)(?P<k>[^*\n]+?)(?<=\S)(?P=f)"), keep_group("k")),  # *emphasis*
    (re.compile(r"(?<![\w])(?P<f>_{1,3})(?=\S)(?P<k>[^_\n]+?)(?<=\S)(?P=f)(?!\w)"), keep_group("k")),  # _it_
    (re.compile(r"~~(?=\S)(?P<k>[^~\n]+?)(?<=\S)~~"), keep_group("k")),  # strike-through
    # marks left unpaired where a live cast's text was cut between sentences ("**A. B**")
    (re.compile(r"\*{2,}|_{2,}|~~|`+"), drop),
    (re.compile(r"[ \t]*\|[ \t]*"), lambda m: (", ",)),  # table cells
]
_PIPES = re.compile(r"^[ \t]*,\s*|,[ \t]*$", _M)  # a table row's outer pipes


def clean_markup(text: str | Mapped) -> Mapped:
    """Markdown, HTML tags and emoji removed; each character mapped to the original's."""
    mapped = text if isinstance(text, Mapped) else Mapped.of(text)
    for pattern, edit in _RULES:
        mapped = mapped.sub(pattern, edit)
    return mapped.sub(_PIPES, drop)
