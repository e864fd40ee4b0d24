"""What a voice id says about the voice: Kokoro names voices ``<language><gender>_<name>``.

``af_heart``: a (American English), f (female), "Heart". Intake gives this with ``/api/voices``;
the pages and the CLI show it. Pure: no I/O, no imports beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass

# The first letter of a Kokoro voice id: (BCP 47 tag, language as people call it).
LANGUAGES = {
    "a": ("en-US", "American English"),
    "b": ("en-GB", "British English"),
    "j": ("ja", "Japanese"),
    "z": ("zh", "Mandarin"),
    "e": ("es", "Spanish"),
    "f": ("fr", "French"),
    "h": ("hi", "Hindi"),
    "i": ("it", "Italian"),
    "p": ("pt-BR", "Brazilian Portuguese"),
}
GENDERS = {"f": "female", "m": "male"}
ENGLISH = ("a", "b")


@dataclass(frozen=True)
class VoiceInfo:
    id: str
    language: str  # "American English"; "Unknown" for an id outside Kokoro's scheme
    lang: str  # BCP 47 ("en-US"), "" when unknown
    gender: str  # "female", "male" or ""
    name: str  # "Heart"


def describe_voice(voice: str) -> VoiceInfo:
    prefix, _, rest = voice.partition("_")
    known = len(prefix) == 2 and prefix[0].lower() in LANGUAGES
    lang, language = LANGUAGES[prefix[0].lower()] if known else ("", "Unknown")
    gender = GENDERS.get(prefix[1].lower(), "") if known else ""
    name = " ".join(w.capitalize() for w in (rest or voice).replace("-", "_").split("_") if w)
    return VoiceInfo(id=voice, language=language, lang=lang, gender=gender, name=name or voice)


def voice_order(voice: str) -> tuple[int, str, str]:
    """Sort key: English first (American, then British), then the other languages by name."""
    info = describe_voice(voice)
    prefix = voice[:1].lower()
    rank = ENGLISH.index(prefix) if prefix in ENGLISH and info.lang else 2 if info.lang else 3
    return rank, info.language, voice
