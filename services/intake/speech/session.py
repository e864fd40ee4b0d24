"""What every speech session shares, whatever its protocol (live WebSocket, WebRTC, ``/v1/speak``;
Wyoming keeps its own frames, ``wyomingserver.py``, and the same seats, ``seats.py``): a client's
place while it has sent nothing yet, and the client's messages read by a deadline that only its
own messages move.

aiohttp's ``receive(timeout)`` restarts its timeout at every pong answering the server's own
heartbeat, so a client that answers pings and says nothing would be held for ever: here the
deadline is a loop time, and the wait for the next message is bounded by what is left of it.
"""

from __future__ import annotations

import asyncio

from aiohttp import WSMessage, WSMsgType, web

from servicekit import ClientHolds

CLOSED = (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR)
# Connections of every client together that have sent nothing yet (a socket and a few KiB each):
# apart from the session caps, so that they never keep a started session out.
MAX_WAITING = 4096


def deadline(after_s: float) -> float:
    """The loop time ``after_s`` from now."""
    return asyncio.get_running_loop().time() + after_s


def left(until: float | None) -> float | None:
    """Seconds left until the loop time ``until`` (None: no limit)."""
    return None if until is None else max(0.0, until - asyncio.get_running_loop().time())


async def receive_by(ws: web.WebSocketResponse, until: float | None) -> WSMessage | None:
    """The client's next message by the loop time ``until`` (None: no limit; pings and pongs do
    not count), None once the client is gone; asyncio.TimeoutError past it."""
    msg = await asyncio.wait_for(ws.receive(), left(until))
    return None if msg.type in CLOSED else msg


class Waiting:
    """A connection's place among its client's that have sent nothing yet
    (INTAKE_SESSIONS_WAITING_PER_CLIENT, in this process): taken at the upgrade or offer, given
    back at the first message or the end, whichever comes first."""

    def __init__(self, holds: ClientHolds, client: str) -> None:
        self.holds, self.client = holds, client
        self.held = False

    def take(self) -> bool:
        """Whether the client had a place left (then this connection holds it)."""
        self.held = self.holds.take(self.client) is None
        return self.held

    def done(self) -> None:
        if self.held:
            self.held = False
            self.holds.give(self.client)
