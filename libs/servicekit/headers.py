"""Security headers on every response (pages, assets, JSON, streams) of a service or the proxy.

A cast's link is a capability to listen, so no page may leak it in a Referer; no other site may
frame a page (clickjacking the paste form); a JSON or MP3 answer is never sniffed into HTML; and
the pages run only this origin's scripts (no inline script: each page loads its own file). A
header a handler set itself is kept.
"""

from __future__ import annotations

from aiohttp import web

# 'self' for everything a page loads; data: images for Swagger UI's icons (its styles are set
# through the DOM, which style-src does not govern).
CSP = "; ".join((
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "media-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
))
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",  # frame-ancestors for browsers that predate it
    "Referrer-Policy": "no-referrer",
}


async def _add(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


def add_security_headers(app: web.Application) -> None:
    """Every response of ``app`` carries :data:`SECURITY_HEADERS` (as it is prepared, so streams,
    files and refusals alike)."""
    app.on_response_prepare.append(_add)
