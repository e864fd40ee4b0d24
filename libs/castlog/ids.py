"""Content ids: the same voice and text always name the same cast."""

from __future__ import annotations

import base64
import hashlib

from .keys import CAST_ID_LEN


def content_id(text: str, voice: str) -> str:
    """``base64url(sha256(voice + "\\x00" + text.strip()))[:12]``, as docs/design.md fixes it."""
    digest = hashlib.sha256((voice + "\x00" + text.strip()).encode("utf-8")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")[:CAST_ID_LEN]
