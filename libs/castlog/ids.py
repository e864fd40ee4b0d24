"""Content ids: the same voice, text and speed always name the same cast."""

from __future__ import annotations

import base64
import hashlib
import hmac

from .keys import CAST_ID_LEN

# The speed of every cast made before speed existed: it leaves the hashed string as it was.
DEFAULT_SPEED = 1.0
MIN_SPEED, MAX_SPEED = 0.25, 4.0


def normalise_speed(speed: float) -> float:
    """Speeds are kept to hundredths: 1.004 and 1.0 name one cast."""
    return round(float(speed), 2)


def content_id(text: str, voice: str, speed: float = DEFAULT_SPEED, key: bytes = b"") -> str:
    """``base64url(sha256(voice + "\\x00" + text.strip()))[:12]``, as docs/design.md fixes it;
    a speed other than 1.0 appends ``"\\x00speed=" + f"{speed:.2f}"`` to the hashed string.
    With a deployment's ``key`` (STREAMTTS_CONTENT_KEY) the hash is HMAC-SHA256 under it, so
    nobody without the key can tell from an id whether a text they guess was cast."""
    material = voice + "\x00" + text.strip()
    speed = normalise_speed(speed)
    if speed != DEFAULT_SPEED:
        material += f"\x00speed={speed:.2f}"
    data = material.encode("utf-8")
    digest = hmac.new(key, data, hashlib.sha256).digest() if key else hashlib.sha256(data).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")[:CAST_ID_LEN]
