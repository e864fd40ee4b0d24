"""How many characters the text paths (splitter, cuts, phrases) have looked at, summed over the
process: a count of work that must grow linearly with the text, which tests compare across sizes
instead of timing anything (a run of stops or a stopless book chapter was quadratic once)."""

from __future__ import annotations

_spent = [0]


def spend(chars: int) -> None:
    """Count ``chars`` characters looked at (a regex's reach, a copy, a token read)."""
    _spent[0] += chars


def spent() -> int:
    """The characters looked at so far; tests take differences around a call."""
    return _spent[0]
