"""espeak-ng through ctypes: a word -> IPA, as the last resort of the G2P.

Uses the library and data that ``espeakng-loader`` ships, so nothing is downloaded and no
system espeak-ng is needed. (misaki's own fallback goes through ``phonemizer``, whose
dependency tree we do not need for this one call.) espeak-ng keeps global state, so every
call holds one process-wide lock.
"""

from __future__ import annotations

import ctypes
import threading

_SYNCHRONOUS = 0x02  # espeak_AUDIO_OUTPUT: no audio device, nothing played
_CHARS_UTF8 = 1
# phoneme_mode: bit 1 = IPA; bit 7 = tie multi-letter phonemes with the char in bits 8-23.
TIE = "^"
_IPA_TIED = 0x02 | 0x80 | (ord(TIE) << 8)
# espeak's tied multi-letter phonemes -> Kokoro's single symbols (after misaki.espeak), for every
# language; English adds its own (english.py).
KOKORO_TIES = {
    "a^ɪ": "I", "a^ʊ": "W", "d^z": "ʣ", "d^ʒ": "ʤ", "e^ɪ": "A", "o^ʊ": "O", "ə^ʊ": "Q", "s^s": "S",
    "t^s": "ʦ", "t^ʃ": "ʧ", "ɔ^ɪ": "Y",
}

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_voice: str | None = None


class EspeakUnavailableError(RuntimeError):
    pass


class _VoiceSpec(ctypes.Structure):
    """espeak_VOICE: selecting by language ("en-gb") is stabler than by voice file name."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("languages", ctypes.c_char_p),
        ("identifier", ctypes.c_char_p),
        ("gender", ctypes.c_ubyte),
        ("age", ctypes.c_ubyte),
        ("variant", ctypes.c_ubyte),
        ("xx1", ctypes.c_ubyte),
        ("score", ctypes.c_int),
        ("spare", ctypes.c_void_p),
    ]


def _library() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        try:
            import espeakng_loader
        except ImportError as e:
            raise EspeakUnavailableError("pip install espeakng-loader (the G2P's espeak-ng fallback)") from e
        lib = ctypes.CDLL(espeakng_loader.get_library_path())
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetVoiceByProperties.restype = ctypes.c_int
        lib.espeak_SetVoiceByProperties.argtypes = [ctypes.POINTER(_VoiceSpec)]
        lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int]
        if lib.espeak_Initialize(_SYNCHRONOUS, 0, espeakng_loader.get_data_path().encode(), 0) < 0:
            raise EspeakUnavailableError("espeak-ng failed to initialize from espeakng-loader's data")
        _lib = lib
    return _lib


def to_ipa(text: str, language: str = "en-us", table: dict[str, str] = KOKORO_TIES) -> str:
    """IPA with stress marks, clauses joined by spaces (espeak drops punctuation); ``table``'s
    phonemes (longest first) written as Kokoro's, other multi-letter ones tied with ``TIE`` (for
    the caller's rules: English's British "iə" is an untied one). ``language``: en-us, el, …"""
    global _voice
    with _lock:
        lib = _library()
        if language != _voice:
            if lib.espeak_SetVoiceByProperties(ctypes.byref(_VoiceSpec(languages=language.encode()))) != 0:
                raise EspeakUnavailableError(f"espeak-ng has no voice {language!r}")
            _voice = language
        pointer = ctypes.pointer(ctypes.c_char_p(text.encode()))
        clauses = []
        # espeak returns one clause per call and advances the pointer; NULL at the end.
        while pointer.contents.value:
            out = lib.espeak_TextToPhonemes(pointer, _CHARS_UTF8, _IPA_TIED)
            if out:
                clauses.append(out.decode())
    ipa = " ".join(c.strip() for c in clauses if c.strip())
    for old, new in sorted(table.items(), key=lambda kv: -len(kv[0])):
        ipa = ipa.replace(old, new)
    return ipa

