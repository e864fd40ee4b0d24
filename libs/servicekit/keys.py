"""The API keys' check (``STREAMTTS_API_KEYS``), one for every service that asks for a key, and the
one reading of ``Authorization: <scheme> <token>``."""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from aiohttp import web


def key_matches(given: object, keys: Iterable[str]) -> bool:
    """``given`` is one of ``keys`` (API keys, the admin token): compared with every one, so the
    time taken does not tell which one nearly matched."""
    if not isinstance(given, str):
        return False
    raw = given.encode()
    matches = [hmac.compare_digest(raw, key.encode()) for key in keys]
    return any(matches)


def bearer(request: web.Request, schemes: tuple[str, ...] = ("bearer",)) -> str:
    """The token of ``Authorization: <scheme> <token>`` when its scheme is one of ``schemes``; else ""."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() in schemes else ""


def bearer_key(request: web.Request, keys: Iterable[str]) -> bool:
    """The request sends one of ``keys`` as ``Authorization: Bearer`` (or ``Token``: Deepgram's clients)."""
    return key_matches(bearer(request, ("bearer", "token")), keys)
