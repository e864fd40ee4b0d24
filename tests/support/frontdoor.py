"""Refusals, the same cases through every front door (``streamtts up``'s proxy, compose's Caddy):
each must reach the client as the service answered it, status and JSON body, a refused WebSocket
upgrade too, never as the door's own 502 (#33: Pipecat showed "HTTP 502", LiveKit retried)."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import ClientSession

from streamtts import routes

API_KEY = "front-door-test-key-0123456789abcdef"
CAST = "AbCdEfGhIjKl"
UPGRADE = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


@dataclass(frozen=True)
class Refused:
    method: str
    path: str
    status: int  # what the service answers
    key: bool = True  # the request carries the API key
    body: bytes = b""
    upgrade: bool = False  # a WebSocket handshake

    def __str__(self) -> str:
        return f"{'upgrade ' if self.upgrade else ''}{self.method} {self.path} {'' if self.key else 'no key'}"


REFUSALS = [
    Refused("GET", "/v1/speak?sample_rate=1", 422, upgrade=True),  # a bad sample rate
    Refused("GET", "/v1/speak?model=nope", 422, upgrade=True),  # an unknown voice
    Refused("GET", "/v1/nope", 404, upgrade=True),  # a wrong path
    Refused("GET", "/v1/audio/speech/live", 401, key=False, upgrade=True),
    Refused("GET", "/v1/speak", 401, key=False, upgrade=True),
    Refused("POST", "/v1/audio/speech", 422, body=b"{}"),
    Refused("POST", "/api/casts", 400, body=b"{"),
    Refused("POST", f"/api/casts/{CAST}/cancel", 401, key=False),
    Refused("POST", f"/api/casts/{CAST}/cancel", 404),
    Refused("GET", f"/api/casts/{CAST}", 404),  # edge's
]


def service_of(refused: Refused, intake: str, edge: str) -> str:
    """The origin of the service that answers ``refused`` behind the door (routes.TABLE)."""
    return intake if routes.pick(refused.method, refused.path.split("?")[0]) == routes.INTAKE else edge


async def answer(http: ClientSession, base: str, refused: Refused) -> tuple[int, str, bytes]:
    """(status, Content-Type, body) that ``base`` answers."""
    headers = {"Content-Type": "application/json", **(UPGRADE if refused.upgrade else {})}
    if refused.key:
        headers["Authorization"] = f"Bearer {API_KEY}"
    async with http.request(refused.method, base + refused.path, headers=headers, data=refused.body) as response:
        return response.status, response.headers.get("Content-Type", ""), await response.read()
