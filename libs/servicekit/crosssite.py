"""Cross-site requests refused: the Origin of a browser's write, and the Host of every request.

A page on another site can make a visitor's browser post a form to ``/generate`` or open the live
WebSocket (neither needs a CORS preflight); a browser names that page in ``Origin``. A write whose
Origin is neither the origin it was sent to (its ``Host``) nor one of ``STREAMTTS_ALLOWED_ORIGINS``
is refused 403 ``cross_site``. A request without Origin is no browser's cross-site request (a
browser sends Origin with every POST and every WebSocket), so scripts and the CLI are unaffected.

DNS rebinding makes an attacker's *name* resolve to 127.0.0.1, so that its page is same-origin
with a local instance: a request whose Host names a host that is not one of
``STREAMTTS_ALLOWED_HOSTS`` is refused 403 ``unknown_host``. An address literal (``127.0.0.1``,
``[::1]``, a LAN address) cannot be rebound and always passes; an empty list checks nothing (a
cluster behind its ingress), and ``streamtts up`` fills it with ``localhost`` and ``--host``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from .errors import Refusal
from .settings import Setting

ALLOWED_ORIGINS: Setting[frozenset[str]] = Setting(
    "STREAMTTS_ALLOWED_ORIGINS", frozenset(), shown="empty (same origin only)",
    doc="comma-separated origins (`https://app.example`) besides the one served whose pages may post "
        "forms and open the live WebSocket (403 `cross_site` otherwise)")
ALLOWED_HOSTS: Setting[frozenset[str]] = Setting(
    "STREAMTTS_ALLOWED_HOSTS", frozenset(), shown="empty (any); `streamtts up`: localhost and `--host`",
    doc="comma-separated host names a request's Host may name (403 `unknown_host` otherwise: DNS "
        "rebinding); address literals always pass")
# Methods that change nothing: a cross-site page may cause them (links, images) and learns nothing.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def host_name(host: str) -> str | None:
    """The name in a Host header (``Example.com:8080`` -> ``example.com``); None if unreadable."""
    try:
        return urlsplit("//" + host).hostname
    except ValueError:
        return None


def host_allowed(host: str | None, names: frozenset[str]) -> bool:
    """Whether a request's Host passes ``names`` (empty: everything does)."""
    if not names:
        return True
    name = host_name(host or "")
    if name is None:
        return False
    try:
        ipaddress.ip_address(name)
        return True  # an address literal cannot be rebound
    except ValueError:
        return name in names


def origin_allowed(origin: str | None, host: str | None, allowed: frozenset[str]) -> bool:
    """Whether a write with this Origin may go to ``host``: no Origin (no browser), the origin
    served, or one of ``allowed``. ``null`` (a sandboxed frame, a file) never passes."""
    if origin is None:
        return True
    if origin in allowed:
        return True
    try:
        netloc = urlsplit(origin).netloc.lower()
    except ValueError:
        return False
    return origin != "null" and bool(netloc) and netloc == (host or "").lower()


def is_write(request: web.Request) -> bool:
    """A request that changes something: an unsafe method, or a WebSocket upgrade (a GET whose
    session writes)."""
    return request.method not in SAFE_METHODS or request.headers.get("Upgrade", "").lower() == "websocket"


def cross_site_guard(
    hosts: frozenset[str], origins: frozenset[str], exempt: Callable[[str], bool] = lambda _path: False
) -> Middleware:
    """A middleware refusing a Host not in ``hosts`` and a cross-site write (paths ``exempt``
    says: the probes, which a cluster calls by its pod's address, pass)."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not exempt(request.path):
            if not host_allowed(request.host, hosts):
                raise Refusal(403, "unknown_host", "this server does not answer to that host name; "
                              f"add it to {ALLOWED_HOSTS.env}")
            if is_write(request) and not origin_allowed(request.headers.get("Origin"), request.host, origins):
                raise Refusal(403, "cross_site", "a page of another site may not write here; "
                              f"add its origin to {ALLOWED_ORIGINS.env}")
        return await handler(request)

    return guard
