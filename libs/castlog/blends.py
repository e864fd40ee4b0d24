"""Weighted voice blends, ``af_bella(2)+af_sky(1)``: a voice of their own, named canonically.

Kokoro-FastAPI's clients name a mix of packs this way; the worker mixes the packs (a weighted
mean of their style tables). Intake writes the blend's canonical name as the cast's voice, so
the mix is part of the content id: the same mix written another way (``af_sky+af_bella(2)``
with weights 1 and 2, or 4 and 2) is the same cast, replayed from the log.
"""

from __future__ import annotations

import re
from collections.abc import Collection

# Packs a blend may mix: beyond a few, a mix is a different voice nobody asked for.
MAX_BLEND_PARTS = 4
# Weights are kept to this many decimals (after they are scaled to sum to 1).
WEIGHT_DECIMALS = 3
_PART = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.-]*)(?:\((\d+(?:\.\d+)?)\))?")

Blend = tuple[tuple[str, float], ...]


class BlendError(ValueError):
    """A blend expression that cannot be read (the message says why, for a 422)."""


def is_blend(voice: str) -> bool:
    return "+" in voice or "(" in voice


def blend_parts(voice: str) -> Blend:
    """``a(2)+b(1)`` -> ((a, 0.667), (b, 0.333)): the heaviest first (its language reads the
    text), names merged, weights summing to 1."""
    weights: dict[str, float] = {}
    for part in voice.split("+"):
        m = _PART.fullmatch(part.strip())
        if m is None:
            raise BlendError(f"{part.strip()!r} is not a voice or voice(weight); write a blend as af_bella(2)+af_sky(1)")
        weights[m.group(1)] = weights.get(m.group(1), 0.0) + float(m.group(2) or 1)
    if len(weights) > MAX_BLEND_PARTS:
        raise BlendError(f"a blend mixes at most {MAX_BLEND_PARTS} voices")
    total = sum(weights.values())
    if total <= 0:
        raise BlendError("a blend's weights must not all be zero")
    scaled = [(name, round(w / total, WEIGHT_DECIMALS)) for name, w in weights.items() if w > 0]
    return tuple(sorted(scaled, key=lambda nw: (-nw[1], nw[0])))


def blend_name(parts: Blend) -> str:
    """The canonical name: one voice alone is its own id; else ``a(0.667)+b(0.333)``."""
    if len(parts) == 1:
        return parts[0][0]
    return "+".join(f"{name}({weight:g})" for name, weight in parts)


def canonical_voice(voice: str) -> str:
    """A voice id as it is, a blend as its canonical name (``BlendError`` when unreadable)."""
    return blend_name(blend_parts(voice)) if is_blend(voice) else voice


def voice_available(voice: str, installed: Collection[str]) -> bool:
    """Whether every pack the voice (or blend) needs is installed."""
    if voice in installed:
        return True
    if not is_blend(voice):
        return False
    try:
        return all(name in installed for name, _ in blend_parts(voice))
    except BlendError:
        return False
