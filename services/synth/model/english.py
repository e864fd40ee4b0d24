"""English G2P without spaCy: misaki's lexicon and rules, a regex tokenizer, espeak-ng last.

misaki (Kokoro's own G2P) wants spaCy's ``en_core_web_sm`` for tokens and part-of-speech tags,
and that model is a download. Its gold/silver dictionaries, stress and number rules need none
of it, so we feed misaki's pipeline tokens from a regex and tags from a few closed-class word
lists. What is lost: homographs (read/read) take their default reading.
"""

from __future__ import annotations

import re
import sys
import types
import unicodedata
from collections.abc import Callable
from typing import Any

from . import espeak
from .mapped import Mapped
from .markup import clean_markup
from .normalize import normalize_mapped
from .quiet import quiet_known_warnings


def _import_misaki_en() -> Any:
    """misaki.en imports spaCy at module level but uses it only in ``G2P.__init__`` and
    ``tokenize``, both replaced below. Without spaCy, import it against an empty stand-in
    that is removed again at once, so nobody else ever sees a fake ``spacy``."""
    try:
        import misaki.en as misaki_en
    except ModuleNotFoundError as e:
        if e.name != "spacy":
            raise
        sys.modules["spacy"] = types.ModuleType("spacy")
        try:
            import misaki.en as misaki_en
        finally:
            del sys.modules["spacy"]
    return misaki_en


misaki_en = _import_misaki_en()
from misaki.token import MToken  # type: ignore[import-untyped,unused-ignore]  # noqa: E402

_MisakiBase: Any = misaki_en.G2P

# Mapping espeak-ng IPA to misaki's symbols for English: the ties, and these (after misaki.espeak).
_ESPEAK_TO_MISAKI = {
    **espeak.KOKORO_TIES, "ʔˌn\u0329": "ʔn", "ʔn\u0329": "ʔn", "e": "A", "ə^l": "ᵊl", "ʲo": "jo", "ʲə": "jə",
    "ʲ": "", "ɚ": "əɹ", "r": "ɹ", "x": "k", "ç": "k", "ɐ": "ə", "ɬ": "l", "\u0303": "",
}

_TOKEN = re.compile(
    r"(?:[A-Za-z]\.){2,}(?![A-Za-z])"  # initialisms: U.S., a.m.
    r"|[^\W_]+(?:'[^\W_]+)*(?:-[^\W_]+(?:'[^\W_]+)*)*"  # words, contractions, compounds
    r"|\S"  # one punctuation mark or symbol
)
# Tags as spaCy's English tagger would give them, for the tokens misaki treats specially.
_PUNCT_TAGS = {
    ".": ".", "!": ".", "?": ".", "\u2026": ":", ",": ",", ";": ":", ":": ":", "\u2014": ":", "-": ":",
    "(": "-LRB-", ")": "-RRB-", "[": "-LRB-", "]": "-RRB-", "\u201c": "``", "\u201d": "''",
    "$": "$", "£": "$", "€": "$", "#": "#",
}
_PREPOSITIONS = frozenset(
    "about above across after against along among around at before behind below beneath beside "
    "between beyond by despite during except for from in inside into like near of off on onto out "
    "outside over past since than through throughout till toward towards under until up upon "
    "versus via with within without".split()
)
_SENTENCE_STARTS = frozenset('.!?:\u2026"\u201c(')
_UNSTRESSED_DROP = re.compile(r"(\S)\u0329")

Fallback = Callable[[str], "str | None"]


class EnglishG2P:
    """American (or British) English text -> misaki phonemes (before the vocabulary filter)."""

    def __init__(self, british: bool = False, foreign: Fallback | None = None) -> None:
        self.british = british
        self._g2p = _MisakiG2P(british, _WordFallback(british, foreign))

    def __call__(self, text: str) -> str:
        return self.tokens(text)[0]

    def tokens(self, text: str) -> tuple[str, list[tuple[str, str]]]:
        """The phonemes, and each word as written in ``text`` with its phonemes: "**1999**" is one
        word, "1999", read as two; punctuation tokens keep their own text."""
        text = unicodedata.normalize("NFC", text)
        spoken = normalize_mapped(clean_markup(text), self.british)
        if not spoken.text:
            return "", []
        phonemes, tokens = self._g2p(spoken.text, preprocess=False)
        return str(phonemes), as_written(tokens, spoken, text)


def as_written(tokens: list[Any], spoken: Mapped, text: str) -> list[tuple[str, str]]:
    """misaki's tokens (of ``spoken.text``) as (the words of ``text`` they read, phonemes): the
    tokens one written word became ("1999", a URL) are one word again."""
    out: list[tuple[str, str]] = []
    cursor, last = 0, (-1, -1)
    for token in tokens:
        said, phonemes = str(token.text), str(token.phonemes or "")
        at = spoken.text.find(said, cursor)
        if at < 0 or not any(c.isalnum() for c in said):
            out.append((said, phonemes))
            cursor, last = (at + len(said) if at >= 0 else cursor), (-1, -1)
            continue
        cursor = at + len(said)
        span = spoken.span(at, cursor)
        if span == last:
            out[-1] = (out[-1][0], f"{out[-1][1]} {phonemes}")
        else:
            out.append((text[span[0]:span[1]].strip() or said, phonemes))
        last = span
    return out


class _MisakiG2P(_MisakiBase):  # type: ignore[misc]  # misaki is untyped
    """misaki's G2P with the spaCy tokenizer swapped for ``tokenize`` below."""

    def __init__(self, british: bool, fallback: _WordFallback) -> None:
        # Deliberately not calling super().__init__: it would load (or download) spaCy.
        self.version = None  # Kokoro v1.0's phoneme set
        self.british = british
        with quiet_known_warnings():
            self.lexicon = misaki_en.Lexicon(british)
        self.fallback = fallback
        self.unk = ""
        fallback.lexicon = self.lexicon

    def tokenize(self, text: str, tokens: object, features: object) -> list[Any]:
        out: list[Any] = []
        previous = ""
        for m in _TOKEN.finditer(text):
            word = m.group(0)
            whitespace = " " if m.end() < len(text) and text[m.end()].isspace() else ""
            out.append(MToken(
                text=word, tag=_tag(word, previous, text, m.start()), whitespace=whitespace,
                _=MToken.Underscore(is_head=True, num_flags="", prespace=False),
            ))
            previous = word
        if out and len(out[-1].text) > 1 and out[-1].text.endswith("."):
            # "... in the U.S." : the initialism swallowed the full stop that ends the text.
            out.append(MToken(text=".", tag=".", whitespace="",
                              _=MToken.Underscore(is_head=True, num_flags="", prespace=False)))
        return out


def _tag(word: str, previous: str, text: str, start: int) -> str:
    if word in _PUNCT_TAGS:
        return _PUNCT_TAGS[word]
    if word == '"':
        return "``" if start == 0 or text[start - 1].isspace() else "''"
    if not any(c.isalnum() for c in word):
        return "NFP"  # emoji and other symbols: misaki reads them as nothing
    lower = word.lower()
    if word.isdigit():
        return "CD"
    if lower in ("a", "an", "the") and word in (lower, lower.capitalize()):
        return "DT"
    if word == "I":
        return "PRP"
    if lower == "to":
        return "TO"
    if lower in _PREPOSITIONS:
        return "IN"
    if word[0].isupper() and previous and previous not in _SENTENCE_STARTS:
        return "NNP"
    return "XX"  # spaCy's "unknown": misaki then takes a homograph's default reading


class _WordFallback:
    """A word the lexicon does not know: try it without accents (café), then a foreign
    script's own G2P, then espeak-ng's English."""

    def __init__(self, british: bool, foreign: Fallback | None) -> None:
        self.language = "en-gb" if british else "en-us"
        self.british = british
        self.foreign = foreign
        self.lexicon: Any = None

    def __call__(self, token: Any) -> tuple[str | None, int | None]:
        word = token.text
        if not word.isascii() and all(_is_latin(c) for c in word if c.isalpha()):
            plain = "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))
            plain_token = MToken(text=plain, tag=token.tag, whitespace=token.whitespace, _=token._)
            phonemes, rating = self.lexicon(plain_token, misaki_en.TokenContext())
            if phonemes is not None:
                return phonemes, rating
        elif any(c.isalpha() and not _is_latin(c) for c in word):
            return (self.foreign(word) if self.foreign else None), 1
        return self._espeak(word), 1

    def _espeak(self, word: str) -> str | None:
        ipa = espeak.to_ipa(word, self.language, _ESPEAK_TO_MISAKI)
        if not ipa:
            return None
        ipa = _UNSTRESSED_DROP.sub(r"ᵊ\1", ipa).replace("\u0329", "")
        if self.british:
            ipa = ipa.replace("iə", "ɪə")
        else:
            ipa = ipa.replace("ɜːɹ", "ɜɹ").replace("ɜː", "ɜɹ").replace("ɪə", "iə").replace("ː", "")
        ipa = ipa.replace("ɾ", "T").replace("ʔ", "t")  # Kokoro v1.0 spells flaps and stops so
        return ipa.replace(espeak.TIE, "")


def _is_latin(c: str) -> bool:
    return not c.isalpha() or unicodedata.name(c, "").startswith("LATIN")
