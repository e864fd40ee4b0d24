"""Refused WebSocket upgrades, the same cases through every front door (``streamtts up``'s proxy,
compose's Caddy): each must reach the client as intake answered it, status and JSON body, and
never as the door's own 502 (#33: Pipecat showed "HTTP 502", LiveKit retried)."""

from __future__ import annotations

from aiohttp import ClientSession

API_KEY = "front-door-test-key-0123456789abcdef"
# (path, whether the request carries the key, intake's status)
REFUSED_UPGRADES = [
    ("/v1/speak?sample_rate=1", True, 422),  # a bad sample rate
    ("/v1/speak?model=nope", True, 422),  # an unknown voice
    ("/v1/nope", True, 404),  # a wrong path
    ("/v1/audio/speech/live", False, 401),  # no key
    ("/v1/speak", False, 401),
]


async def upgrade(http: ClientSession, url: str, key: bool) -> tuple[int, str, bytes]:
    """(status, Content-Type, body) of a WebSocket handshake the server refuses."""
    headers = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    if key:
        headers["Authorization"] = f"Bearer {API_KEY}"
    async with http.get(url, headers=headers) as response:
        return response.status, response.headers.get("Content-Type", ""), await response.read()
