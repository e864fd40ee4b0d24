"""Parse and check a submission: body → fields → normalised text, title and voice, or a Refusal.

Pure functions, no I/O: everything here runs before the one Redis write, so a refusal can
never leave a key behind.
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from castlog import DEFAULT_SPEED, MAX_SPEED, MIN_SPEED, BlendError, canonical_voice, normalise_speed, voice_available
from servicekit import Refusal as Refusal  # intake's modules raise it from here
from servicekit.forms import CastForm as CastForm  # intake's modules decode with it from here

# A default title is the first words of the text, at most this long, cut on a word boundary.
DEFAULT_TITLE_CHARS = 60
# A default title never cuts inside the first this-many characters: a long first "word"
# (a URL, CJK without spaces) is cut hard instead.
MIN_TITLE_WORD_CUT = 20
ELLIPSIS = "…"
# A first sentence up to this long is the title as it stands (its stop dropped), uncut.
TITLE_SENTENCE_CHARS = 100
_FIRST_SENTENCE = re.compile(r"(.+?)[.!?。！？](?:\s|$)")
# A form with more fields than this is not from our paste form.
MAX_FORM_FIELDS = 32
# Voice names listed in an unknown_voice refusal; the rest are at GET /api/voices.
LISTED_VOICES = 12

# Cc (C0, DEL, C1) except \t and \n; \r is turned into \n first so that old line ends survive.
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_LINE_ENDS = re.compile(r"\r\n?")
_WHITESPACE = re.compile(r"\s+")
_SURROGATES = re.compile(r"[\ud800-\udfff]")
# Markdown's marks at the start of a line (heading, quote, list item) and around words (emphasis, code).
_LINE_MARKS = re.compile(r"^(?:#{1,6}|>|[-*+]|\d{1,3}[.)])[ \t]+")
_MARKS = re.compile(r"\*\*|__|`+|~~")


@dataclass(frozen=True)
class Submission:
    """A checked submission: the text exactly as it will be stored and hashed."""

    text: str
    voice: str
    title: str
    speed: float = DEFAULT_SPEED


F = TypeVar("F", bound=msgspec.Struct)
CAST_SHAPE = (
    'send {"text": string, "voice": string (optional), "title": string (optional), '
    f'"speed": number from {MIN_SPEED} to {MAX_SPEED} (optional)}}'
)


def is_form(content_type: str, charset: str | None, *, allow_form: bool) -> bool:
    """Whether the body is the paste form (else JSON), from its Content-Type; 415 for anything else."""
    if charset is not None and charset.lower() not in ("utf-8", "utf8"):
        raise Refusal(415, "unsupported_media_type", "send the body encoded as UTF-8")
    if content_type == "application/json" or content_type.endswith("+json"):
        return False
    if allow_form and content_type == "application/x-www-form-urlencoded":
        return True
    wanted = "application/json or application/x-www-form-urlencoded" if allow_form else "application/json"
    raise Refusal(415, "unsupported_media_type", f"send the body with Content-Type: {wanted}")


def decode(body: bytes, form: type[F], shape: str) -> F:
    """``body`` as the JSON of ``form``; 422 for a field of the wrong kind, 400 for a body that is
    not JSON (``shape`` says what to send)."""
    try:
        return msgspec.json.decode(body, type=form)
    except msgspec.ValidationError as exc:
        raise Refusal(422, "invalid_field", f"{exc}; {shape}") from None
    except msgspec.DecodeError as exc:
        # msgspec refuses invalid UTF-8, lone surrogate escapes and malformed JSON alike.
        raise Refusal(400, "malformed_json", f"the body is not valid UTF-8 JSON ({exc}); {shape}") from None
    except RecursionError:
        # msgspec skips an unknown field's value recursively; a very deep one exhausts the stack.
        raise Refusal(400, "malformed_json", f"the body is nested too deeply; {shape}") from None


def parse_form(body: bytes) -> CastForm:
    """An application/x-www-form-urlencoded body (the paste form), UTF-8, each field at most once."""
    try:
        pairs = urllib.parse.parse_qsl(
            body.decode("utf-8"),
            keep_blank_values=True,
            encoding="utf-8",
            errors="strict",
            max_num_fields=MAX_FORM_FIELDS,
        )
    except UnicodeDecodeError:
        raise Refusal(400, "malformed_form", "the form is not valid UTF-8; send it encoded as UTF-8") from None
    except ValueError:
        raise Refusal(400, "malformed_form", f"the form has more than {MAX_FORM_FIELDS} fields") from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in ("text", "voice", "title"):
            if name in fields:
                raise Refusal(422, "invalid_field", f"the form field `{name}` is given more than once; send it once")
            fields[name] = value
    if "text" not in fields:
        raise Refusal(422, "invalid_field", "the form has no `text` field; send the text to read out")
    return CastForm(text=fields["text"], voice=fields.get("voice"), title=fields.get("title"))


def normalise_text(raw: str) -> str:
    """The text as stored and hashed: controls (but newlines and tabs) removed, NFC, stripped.

    Controls go first: one between a letter and its combining mark would block NFC composition.
    """
    return unicodedata.normalize("NFC", CONTROLS.sub("", _LINE_ENDS.sub("\n", raw))).strip()


def normalise_title(raw: str) -> str:
    """One line: like the text, with every run of white space (newlines too) made one space."""
    return _WHITESPACE.sub(" ", normalise_text(raw))


def default_title(text: str, limit: int = DEFAULT_TITLE_CHARS) -> str:
    """The first words of ``text``: its first line when that is short (often a heading), else
    as many words as fit in ``limit`` characters, with an ellipsis; markdown's marks (an LLM's
    ``## Heading``, ``**bold**``) are not part of it."""
    raw = text[: limit * 4]
    complete = "\n" in raw or len(text) <= len(raw)
    head = _MARKS.sub("", _LINE_MARKS.sub("", raw.lstrip()))
    first_line = " ".join(head.split("\n", 1)[0].split())
    if len(first_line) <= limit and complete:
        return first_line
    sentence = _FIRST_SENTENCE.match(first_line)
    if sentence and len(sentence.group(1)) <= TITLE_SENTENCE_CHARS:
        return sentence.group(1)
    cut = first_line.rfind(" ", 0, limit + 1)
    title = first_line[:cut] if cut >= MIN_TITLE_WORD_CUT else first_line[:limit]
    return title.rstrip(" ,;:-–—") + ELLIPSIS


def refuse_surrogates(text: str) -> None:
    """400 for a text with lone surrogates: not Unicode that UTF-8 can carry."""
    # isascii() is O(1) in CPython: most texts skip the scan (the decoders refuse them already).
    if not text.isascii() and _SURROGATES.search(text) is not None:
        raise Refusal(400, "invalid_text", "the text is not valid Unicode (lone surrogates); send UTF-8 text")


def check(form: CastForm, voices: tuple[str, ...], default_voice: str, max_chars: int, max_title_chars: int) -> Submission:
    """Normalise and check every field; the first problem found is refused."""
    refuse_surrogates(form.text)
    refuse_surrogates(form.title or "")
    text = normalise_text(form.text)
    if not text:
        raise Refusal(422, "empty_text", "the text is empty; send some words to read out")
    if len(text) > max_chars:
        raise Refusal(
            413,
            "text_too_long",
            f"the text has {len(text)} characters, more than {max_chars}; split it into several casts",
        )
    voice = _voice(form.voice or default_voice)
    if not voice_available(voice, voices):
        listed = ", ".join(voices[:LISTED_VOICES]) + (", …" if len(voices) > LISTED_VOICES else "")
        raise Refusal(422, "unknown_voice", f"no such voice; pick one of {listed} (see GET /api/voices)")
    speed = check_speed(form.speed)
    title = check_title(form.title, max_title_chars)
    return Submission(text=text, voice=voice, title=title or default_title(text), speed=speed)


def _voice(voice: str) -> str:
    """A voice id, or a blend (``af_bella(2)+af_sky(1)``) by its canonical name: the mix is the cast's voice."""
    try:
        return canonical_voice(voice)
    except BlendError as exc:
        raise Refusal(422, "unknown_voice", str(exc)) from None


def check_title(title: str | None, limit: int) -> str:
    """The title as kept ("" for none), or 422 past ``limit`` characters."""
    title = normalise_title(title) if title else ""
    if len(title) > limit:
        raise Refusal(422, "title_too_long", f"the title has {len(title)} characters, more than {limit}; shorten it")
    return title


def check_speed(speed: float | None) -> float:
    """The speed as the cast keeps it (hundredths), or 422 outside [MIN_SPEED, MAX_SPEED]."""
    if speed is None:
        return DEFAULT_SPEED
    if not MIN_SPEED <= speed <= MAX_SPEED:  # NaN fails this too
        raise Refusal(422, "invalid_field", f"`speed` must be from {MIN_SPEED} to {MAX_SPEED}, not {speed}")
    return normalise_speed(speed)
