"""WebSocket upgrades through the local front proxy (the live speech routes): one upstream
WebSocket per client, messages relayed both ways as they come, and the closing side's code and
reason handed on, so that a client told "slow reader, resume at seq_num N" hears it through here.

A refused upgrade (intake's 422 for an unknown voice, a 401, a 404) reaches the client as the
service sent it, status, headers and JSON body, as Caddy passes it: never as the proxy's own 502.
Each hop pings its own peer: the proxy pings the client (``STREAMTTS_PROXY_HEARTBEAT_S``), so a
dead client behind it ends its session upstream; a client's message is at most what intake takes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import ClientResponse, ClientSession, WSMsgType, web
from multidict import CIMultiDict, CIMultiDictProxy

log = logging.getLogger(__name__)

# The largest message relayed from a service (audio comes in big pieces); a client's are bounded
# by Limits.max_message_bytes, intake's own limit.
MAX_UPSTREAM_MESSAGE_BYTES = 4 * 1024 * 1024
# The most of a refusal's body handed on (intake's are a few hundred bytes of JSON).
MAX_REFUSAL_BYTES = 64 * 1024
# The client WebSockets being relayed: closed (1001, going away) on shutdown, with the proxy's relays.
SOCKETS: web.AppKey[set[web.WebSocketResponse]] = web.AppKey("websockets")
# Either end: aiohttp's server and client sockets share receive, send_str, send_bytes and close.
Socket = Any
_ENDS = (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR)


class UpgradeRefused(Exception):
    """The service answered an upgrade with something other than 101: its answer, to hand on."""

    def __init__(self, status: int, reason: str | None, headers: CIMultiDictProxy[str], body: bytes) -> None:
        super().__init__(status)
        self.status, self.reason, self.headers, self.body = status, reason, headers, body


class UpgradeResponse(ClientResponse):
    """aiohttp's client drops a refused handshake's body; this keeps it (up to MAX_REFUSAL_BYTES).
    Any other answer passes as it is: the proxy's one session per upstream relays both."""

    async def start(self, connection: Any) -> ClientResponse:
        await super().start(connection)
        if self.status != 101 and is_upgrade(self.request_info.headers):
            try:  # the body to its end, or its first MAX_REFUSAL_BYTES
                body = await self.content.readexactly(MAX_REFUSAL_BYTES)
            except asyncio.IncompleteReadError as short:
                body = short.partial
            raise UpgradeRefused(self.status, self.reason, self.headers, body)
        return self


def is_upgrade(headers: Mapping[str, str]) -> bool:
    return headers.get("Upgrade", "").lower() == "websocket"


async def connect(request: web.Request, session: ClientSession, base_url: str, headers: Mapping[str, str]) -> Any:
    """The upstream WebSocket through ``session`` (its responses UpgradeResponse); UpgradeRefused with the
    service's answer, or a ClientError/OSError when it cannot be reached."""
    url = base_url.replace("http", "ws", 1) + request.rel_url.raw_path_qs
    forwarded = CIMultiDict((k, v) for k, v in headers.items() if not k.lower().startswith("sec-websocket"))
    return await session.ws_connect(url, headers=forwarded, max_msg_size=MAX_UPSTREAM_MESSAGE_BYTES)


async def relay(request: web.Request, upstream: Any, max_message_bytes: int, heartbeat_s: float,
                write_timeout_s: float, cut: Callable[[web.Request], None]) -> web.StreamResponse:
    """Relay until either end closes; ``cut`` ends a client that takes nothing for ``write_timeout_s``."""
    client = web.WebSocketResponse(max_msg_size=max_message_bytes, heartbeat=heartbeat_s)
    await client.prepare(request)
    sockets = request.app[SOCKETS]
    sockets.add(client)
    try:
        down = asyncio.ensure_future(_pump(upstream, client, write_timeout_s))
        up = asyncio.ensure_future(_pump(client, upstream, write_timeout_s))
        done, pending = await asyncio.wait({down, up}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if down in done and isinstance(down.exception(), asyncio.TimeoutError):
            log.debug("websocket client stopped reading for %gs; cut", write_timeout_s)
            cut(request)  # its unread audio leaves the kernel's buffers now
    finally:
        sockets.discard(client)
        await upstream.close()
        await client.close()
    return client


async def _pump(src: Socket, dst: Socket, write_timeout_s: float) -> None:
    """Messages from ``src`` to ``dst`` until ``src`` closes; then close ``dst`` the same way. A
    ``dst`` that takes nothing for ``write_timeout_s`` ends it (asyncio.TimeoutError)."""
    while True:
        msg = await src.receive()
        if msg.type == WSMsgType.TEXT:
            await asyncio.wait_for(dst.send_str(msg.data), write_timeout_s)
        elif msg.type == WSMsgType.BINARY:
            await asyncio.wait_for(dst.send_bytes(msg.data), write_timeout_s)
        elif msg.type in _ENDS:
            # a message past the client's limit closes it with 1009 (aiohttp): intake hears the same
            code = msg.data if msg.type == WSMsgType.CLOSE and isinstance(msg.data, int) else 1000
            reason = (msg.extra or "").encode() if msg.type == WSMsgType.CLOSE else b""
            if msg.type == WSMsgType.ERROR:
                code = getattr(src, "close_code", None) or 1011
            await asyncio.wait_for(dst.close(code=code, message=reason), write_timeout_s)
            return
