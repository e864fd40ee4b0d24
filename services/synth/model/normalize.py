"""English text normalization: numbers, money, dates, times, abbreviations, URLs, e-mail
addresses and symbols become words.

Runs before the lexicon, so the G2P only ever sees words and punctuation. Rules are ordered
from the most specific pattern (a date, a price) to the most general (a bare integer). Every
rewrite keeps the offset map (``Mapped``): "1999" read as two words still points at "1999".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from num2words import num2words

from .mapped import Mapped, drop, translate

Rule = tuple["re.Pattern[str]", Callable[["re.Match[str]", bool], str]]

MONTHS = (
    "January February March April May June July August September October November December".split()
)
_MONTH_ABBREVIATIONS = {m[:3]: m for m in MONTHS} | {"Sept": "September"}
_SCALES = {"k": "thousand", "K": "thousand", "thousand": "thousand", "million": "million", "m": "million",
           "M": "million", "bn": "billion", "billion": "billion", "trillion": "trillion"}
_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
               "£": ("pound", "pounds", "penny", "pence")}
_DENOMINATORS = {2: ("half", "halves"), 4: ("quarter", "quarters")}

# Case-sensitive; a trailing period of the source is kept when it also ends the sentence.
_ABBREVIATIONS = {
    "Mr.": "Mister", "Mrs.": "Missus", "Ms.": "Miz", "Prof.": "Professor", "Jr.": "Junior",
    "Sr.": "Senior", "Mt.": "Mount", "vs.": "versus", "etc.": "et cetera", "e.g.": "for example",
    "i.e.": "that is", "approx.": "approximately", "Inc.": "Incorporated", "Ltd.": "Limited",
    "Co.": "Company", "Fig.": "Figure", "Ave.": "Avenue", "Dept.": "Department", "Corp.": "Corporation",
}
_ABBREVIATION = re.compile(
    r"(?<![\w.])(" + "|".join(re.escape(a) for a in sorted(_ABBREVIATIONS, key=len, reverse=True)) + r")(?!\w)"
)
# "Dr." and "St." read by what follows: a name (Doctor Who, Saint Patrick) or not (Elm Drive).
_TITLE_OR_PLACE = re.compile(r"(?<![\w.])(Dr|St)\.(?=(\s+[A-Z])?)")
_NUMBER_SIGN = re.compile(r"(?<![\w.])(?:#|No\.\s?)(?=\d)")

_CHARACTERS = {
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u2032": "'", "\u00ab": "\u201c", "\u00bb": "\u201d",
    "\u201e": "\u201c", "\u2033": '"', "\u00a0": " ", "\u2009": " ", "\u202f": " ", "\t": " ",
    "\u2013": "\u2014", "\u2012": "\u2014", "\u2015": "\u2014", "&": " and ", "+": " plus ", "=": " equals ",
    "@": " at ", "\u00d7": " times ", "\u2192": " to ", "\u2248": " about ", "\u2264": " at most ",
    "\u2265": " at least ", "\u00b1": " plus or minus ", "\u2260": " is not ", "*": " ", "_": " ", "#": " ",
    "`": " ", "~": " ", "|": ", ", "^": " ", "\\": " ", "<": " ", ">": " ", "{": " ", "}": " ", "\u2022": ", ",
}
# Web addresses are read by their host ("github dot com"); a path is not worth hearing.
_URL = re.compile(r"\b(?:https?://|www\.)(?:www\.)?(?P<host>[\w-]+(?:\.[\w-]+)*)(?::\d+)?"
                  r"(?:[/?#][^\s<>()\[\]\"']*[^\s<>()\[\]\"'.,;:!?])?/?")
_BARE_DOMAIN = re.compile(r"\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|org|net|io|dev|ai|app|edu|gov)\b(?!\.\w)")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_APPROXIMATELY = re.compile(r"~\s?(?=\d)")
_TIMES_SIGN = re.compile(r"(?<=\d)\s?\*\s?(?=\d)")
_SPACES = re.compile(r"\s+")
_ELLIPSIS = re.compile(r"\.{3,}")


def normalize_english(text: str, british: bool = False) -> str:
    """Text -> the same text with every number and known abbreviation spelled out."""
    return normalize_mapped(Mapped.of(unicodedata.normalize("NFC", text)), british).text


def normalize_mapped(mapped: Mapped, british: bool = False) -> Mapped:
    """``normalize_english`` keeping the offset map (the text is NFC already)."""
    mapped = mapped.replace(_EMAIL, _email)
    mapped = mapped.replace(_URL, lambda m: _dotted(m.group("host")))
    mapped = mapped.replace(_BARE_DOMAIN, lambda m: _dotted(m.group(0)))
    mapped = mapped.replace(_ELLIPSIS, lambda m: "\u2026")
    mapped = mapped.replace(_ABBREVIATION, _abbreviation)
    mapped = mapped.replace(_TITLE_OR_PLACE, _title_or_place)
    mapped = mapped.replace(_NUMBER_SIGN, lambda m: "number ")
    mapped = mapped.replace(_APPROXIMATELY, lambda m: "about ")
    mapped = mapped.replace(_TIMES_SIGN, lambda m: " times ")
    for pattern, spell in _RULES:
        mapped = mapped.replace(pattern, lambda m, spell=spell: spell(m, british))  # type: ignore[misc]
    mapped = translate(mapped, _CHARACTERS)
    mapped = mapped.replace(_SPACES, lambda m: " ")
    mapped = mapped.sub(_SPACE_BEFORE_STOP, drop)
    return mapped.sub(_OUTER_SPACE, drop)


_OUTER_SPACE = re.compile(r"^\s+|\s+$")
_SPACE_BEFORE_STOP = re.compile(r"(?<=\w) (?=[.,;:!?](?:\s|$))")  # "dot com ." from a URL's padding


def _dotted(name: str) -> str:
    return " " + " dot ".join(p for p in name.lower().removeprefix("www.").split(".") if p) + " "


def _email(m: re.Match[str]) -> str:
    user, _, host = m.group(0).partition("@")
    return f" {' dot '.join(user.split('.'))} at{_dotted(host)}"


def _abbreviation(m: re.Match[str]) -> str:
    words = _ABBREVIATIONS[m.group(1)]
    return words + "." if not m.string[m.end():].strip() else words


def _title_or_place(m: re.Match[str]) -> str:
    if m.group(2):
        return {"Dr": "Doctor", "St": "Saint"}[m.group(1)]
    return {"Dr": "Drive", "St": "Street"}[m.group(1)] + ("." if not m.string[m.end():].strip() else "")


# --- numbers -------------------------------------------------------------------------------

def cardinal(n: int | str, british: bool = False) -> str:
    return _clean(num2words(int(str(n).replace(",", ""))), british)


def ordinal(n: int | str, british: bool = False) -> str:
    return _clean(num2words(int(n), to="ordinal"), british)


def year(n: int | str, british: bool = False) -> str:
    return _clean(num2words(int(n), to="year"), british)


def _clean(words: str, british: bool) -> str:
    """num2words writes "one hundred and five", "one million, two": American English drops
    the "and", and a comma inside a number must not become a pause."""
    words = words.replace(",", "")
    return words if british else re.sub(r"\band ", "", words)


def _decimal(integer: str, fraction: str, british: bool) -> str:
    digits = " ".join(cardinal(d) for d in fraction)
    return f"{cardinal(integer or 0, british)} point {digits}"


def _number(text: str, british: bool) -> str:
    integer, _, fraction = text.replace(",", "").partition(".")
    return _decimal(integer, fraction, british) if fraction else cardinal(integer, british)


def _plural(word: str, count: float, one: str, many: str) -> str:
    return f"{word} {one if count == 1 else many}"


def _money(m: re.Match[str], british: bool) -> str:
    one, many, cent, cents = _CURRENCIES[m.group(1)]
    integer, fraction, scale = m.group(2).replace(",", ""), m.group(3), m.group(4)
    if scale:
        amount = _decimal(integer, fraction, british) if fraction else cardinal(integer, british)
        return f"{amount} {_SCALES[scale]} {many}"
    whole = int(integer)
    parts = [_plural(cardinal(whole, british), whole, one, many)] if whole or not fraction else []
    if fraction:
        if len(fraction) > 2:  # $0.999 is not a price in cents: read the digits
            return f"{_decimal(integer, fraction, british)} {many}"
        hundredths = int(fraction.ljust(2, "0"))
        if hundredths:
            parts.append(_plural(cardinal(hundredths, british), hundredths, cent, cents))
    return " and ".join(parts) or f"zero {many}"


def _time(m: re.Match[str], british: bool) -> str:
    hour, minute, meridiem = int(m.group(1)), m.group(2), m.group(3)
    if minute is None or int(minute) == 0:
        words = cardinal(hour) + ("" if meridiem else " o'clock")
    elif int(minute) < 10:
        words = f"{cardinal(hour)} oh {cardinal(minute)}"
    else:
        words = f"{cardinal(hour)} {cardinal(minute)}"
    if meridiem:
        words += f" {meridiem[0].lower()}.m."
    return words


def _date(year_: str, month: str, day: str, british: bool) -> str:
    name = MONTHS[int(month) - 1]
    if british:
        return f"the {ordinal(day)} of {name} {year(year_, british)}"
    return f"{name} {ordinal(day)}, {year(year_, british)}"


def _iso_date(m: re.Match[str], british: bool) -> str:
    return _date(m.group(1), m.group(2), m.group(3), british)


def _slash_date(m: re.Match[str], british: bool) -> str:
    first, second, year_ = m.group(1), m.group(2), m.group(3)
    month, day = (second, first) if british else (first, second)
    if not 1 <= int(month) <= 12:
        month, day = day, month
    if len(year_) == 2:
        year_ = ("20" if int(year_) < 50 else "19") + year_
    return _date(year_, month, day, british)


def _month_day(m: re.Match[str], british: bool) -> str:
    return f"{_MONTH_ABBREVIATIONS.get(m.group(1), m.group(1))} {ordinal(m.group(2))}"


def _fraction(m: re.Match[str], british: bool) -> str:
    top, bottom = int(m.group(1)), int(m.group(2))
    if bottom == 0:
        return f"{cardinal(top)} over zero"
    one, many = _DENOMINATORS.get(bottom, (ordinal(bottom), ordinal(bottom) + "s"))
    return f"{cardinal(top, british)} {one if top == 1 else many}"


def _decade(m: re.Match[str], british: bool) -> str:
    words = year(m.group(1), british) if len(m.group(1)) == 4 else cardinal(m.group(1))
    return words[:-1] + "ies" if words.endswith("y") else words + "s"


def _digits_or_cardinal(m: re.Match[str], british: bool) -> str:
    text = m.group(0)
    if len(text) > 1 and text.startswith("0"):  # 007, zip codes: digit by digit
        return " ".join("oh" if d == "0" else cardinal(d) for d in text)
    return cardinal(text, british)


# A number with thousands separators, or plain digits: never swallows a trailing comma.
_AMOUNT = r"(?:\d{1,3}(?:,\d{3})+|\d+)"
_MONTH_NAMES = "|".join(MONTHS + list(_MONTH_ABBREVIATIONS))
_RULES: list[Rule] = [
    (re.compile(rf"([$€£])\s?({_AMOUNT})(?:\.(\d+))?(?:\s?(thousand|million|billion|trillion|bn|[kKmM])\b)?"),
     _money),
    (re.compile(r"\b(\d{4})-(0?[1-9]|1[0-2])-(0?[1-9]|[12]\d|3[01])\b"), _iso_date),
    (re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})\b"), _slash_date),
    (re.compile(r"\b([01]?\d|2[0-3]):([0-5]\d)(?::[0-5]\d)?(?:\s?([AaPp])\.?[Mm]\b\.?)?"), _time),
    (re.compile(r"\b(1[0-2]|0?[1-9])(?:\s?([AaPp])\.?[Mm]\b\.?)"),
     lambda m, b: f"{cardinal(m.group(1))} {m.group(2).lower()}.m."),
    (re.compile(rf"\b({_MONTH_NAMES})\.?\s(\d{{1,2}})(?:st|nd|rd|th)?\b(?!:)"), _month_day),
    (re.compile(r"\b(\d+)(?:st|nd|rd|th)\b"), lambda m, b: ordinal(m.group(1), b)),
    (re.compile(rf"({_AMOUNT}(?:\.\d+)?)\s?%"), lambda m, b: _number(m.group(1), b) + " percent"),
    (re.compile(rf"({_AMOUNT}(?:\.\d+)?)\s?°\s?([CF])\b"),
     lambda m, b: _number(m.group(1), b) + (" degrees Celsius" if m.group(2) == "C" else " degrees Fahrenheit")),
    (re.compile(r"(?<=\d)\s?°"), lambda m, b: " degrees"),
    (re.compile(r"\b(\d{1,3})/(\d{1,3})\b"), _fraction),
    (re.compile(r"\b(\d+)\s?[-\u2013]\s?(\d+)\b"), lambda m, b: f"{m.group(1)} to {m.group(2)}"),
    (re.compile(r"(?<![\w.])-(?=\d)"), lambda m, b: "minus "),
    (re.compile(r"\b([1-9]0|1\d\d0|20\d0)'?s\b"), _decade),
    (re.compile(r"\b\d+\.\d+\b"), lambda m, b: _number(m.group(0), b)),
    (re.compile(r"\b(1[1-9]\d\d|20\d\d)\b(?!,\d)"), lambda m, b: year(m.group(1), b)),
    (re.compile(r"\b\d{1,3}(?:,\d{3})+\b"), lambda m, b: cardinal(m.group(0), b)),
    (re.compile(r"\d+"), _digits_or_cardinal),
]
