"""The local front proxy's listening socket: what aiohttp's server does not bound by itself.

Each connection passes a doorway before aiohttp's handler sees it: at most
``STREAMTTS_PROXY_CONNECTIONS_PER_CLIENT`` open from one client address (one more is answered
429 and closed, so 300 trickling connections from one address hold 64, not 300), and its first
request head whole within ``STREAMTTS_PROXY_HEADER_TIMEOUT_S`` (a slow-loris gets 408 and is
closed). Later heads are bounded by aiohttp's keep-alive timeout (``STREAMTTS_PROXY_IDLE_S``),
which it restarts after each response and which closes a connection whose handler waits for one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from servicekit import ClientHolds, client_address

# Connections of all clients together: far above any one client's share (open sockets cost the
# host file descriptors; the per-client cap is the bound that matters).
TOTAL_CONNECTIONS = 4096
HEAD_END = b"\r\n\r\n"


def refusal(status: int, reason: str, error: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer with a JSON body, written before the connection is closed."""
    body = json.dumps({"error": error, "message": message}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body


@dataclass
class Doorway:
    handler: Callable[[], asyncio.Protocol]  # aiohttp's per-connection protocol factory (web.Server)
    header_timeout_s: float
    connections: ClientHolds


class _Gated(asyncio.Protocol):
    """One connection: counted for its client, timed until its first head, then aiohttp's."""

    def __init__(self, door: Doorway) -> None:
        self.door = door
        self.inner: asyncio.Protocol | None = None  # aiohttp's, once the connection is let in
        self.client = ""
        self.transport: asyncio.Transport | None = None
        self.deadline: asyncio.TimerHandle | None = None
        self.tail = b""  # the last bytes read before a head's end was seen (it may span two reads)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        client = client_address(peer[0] if peer else None, None, frozenset())
        refused = self.door.connections.take(client)
        if refused is not None:
            transport.write(refusal(429, "Too Many Requests", "too_many_connections",
                                    "your address has too many connections open; close some and retry"
                                    if refused == "client" else "too many connections; retry in a moment"))
            transport.close()
            return
        self.client = client
        self.deadline = asyncio.get_running_loop().call_later(self.door.header_timeout_s, self._late)
        self.inner = self.door.handler()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.inner is None:
            return
        if self.deadline is not None:
            seen = self.tail + data
            if HEAD_END in seen:
                self.deadline.cancel()
                self.deadline, self.tail = None, b""
            else:
                self.tail = seen[-(len(HEAD_END) - 1):]
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.inner is None:
            return
        if self.deadline is not None:
            self.deadline.cancel()
        self.door.connections.give(self.client)
        self.inner.connection_lost(exc)
        self.inner = None

    def _late(self) -> None:
        self.deadline = None
        assert self.transport is not None
        self.transport.write(refusal(408, "Request Timeout", "header_timeout",
                                     f"the request head took longer than {self.door.header_timeout_s:g} s; "
                                     "send it at once"))
        self.transport.close()


@dataclass
class Serving:
    runner: web.AppRunner
    server: asyncio.AbstractServer
    door: Doorway

    async def close(self) -> None:
        """Stop listening, then end the app (its connections, its relays) as aiohttp does."""
        self.server.close()
        await self.runner.cleanup()


async def serve(runner: web.AppRunner, host: str, port: int, header_timeout_s: float,
                connections_per_client: int) -> Serving:
    """Listen on ``host:port`` for a set-up ``runner``, each connection through the doorway."""
    assert runner.server is not None, "set the runner up first"
    door = Doorway(runner.server, header_timeout_s, ClientHolds(TOTAL_CONNECTIONS, connections_per_client))
    server = await asyncio.get_running_loop().create_server(lambda: _Gated(door), host, port, reuse_address=True)
    return Serving(runner, server, door)
