"""Settings from the environment: the one typed reader behind every service's ``config.py``.

In the spirit of starlette's ``Config``: the caller hands in the mapping (``os.environ`` from
``config.py``, the only module that touches it; a plain dict in tests), every value is read by
name with a parser and a default, and a value that cannot be used raises ``ConfigError`` naming
the variable and what is wrong with it. Parsers are plain ``str -> value`` callables: ``int``,
``float``, ``str.upper``, or the helpers here for flags and comma-separated names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")
D = TypeVar("D")

# Spellings of a flag, compared case-insensitively; anything else is refused, not guessed.
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


class ConfigError(ValueError):
    """A setting that a service cannot use; the message names the variable and what is wrong."""


class Settings:
    """Typed reads of one environment mapping. An unset or blank variable means the default."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ

    def get(self, name: str, parse: Callable[[str], T], default: D) -> T | D:
        """``parse`` of the value with surrounding blanks stripped, or ``default`` when it is
        unset or blank (``default=None`` makes an optional setting). A ``ValueError`` from
        ``parse`` becomes a ``ConfigError`` naming the variable."""
        raw = self._environ.get(name)
        if raw is None or not raw.strip():
            return default
        try:
            return parse(raw.strip())
        except ValueError as exc:
            raise ConfigError(f"{name}={raw!r} is not valid: {exc}") from exc


def comma_list(raw: str) -> tuple[str, ...]:
    """A comma-separated list of names: blanks around them and empty items dropped, order kept."""
    return tuple(name.strip() for name in raw.split(",") if name.strip())


def comma_set(raw: str) -> frozenset[str]:
    """A comma-separated set of names (as ``comma_list``, order and repeats dropped)."""
    return frozenset(comma_list(raw))


def flag(raw: str) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` in any case (``bool(raw)`` would take "false" as
    true)."""
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"expected one of {', '.join(sorted(TRUE_WORDS | FALSE_WORDS))}")


def require_positive(values: Mapping[str, float]) -> None:
    """Refuse the first setting (variable name -> value) that is not greater than 0."""
    for name, value in values.items():
        if not value > 0:  # written so that NaN is refused too
            raise ConfigError(f"{name} must be greater than 0, not {value}")


def require_non_negative(values: Mapping[str, float]) -> None:
    """Refuse the first setting (variable name -> value) that is below 0."""
    for name, value in values.items():
        if not value >= 0:
            raise ConfigError(f"{name} must be 0 or more, not {value}")
