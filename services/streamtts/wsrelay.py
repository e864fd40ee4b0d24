"""WebSocket upgrades through the local front proxy (the live speech route): one upstream
WebSocket per client, messages relayed both ways as they come, and the closing side's code and
reason handed on, so that a client told "slow reader, resume at seq_num N" hears it through here.
Pings are each hop's own (aiohttp answers them)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import ClientError, ClientSession, WSMsgType, web
from multidict import CIMultiDict

log = logging.getLogger(__name__)

# The largest message relayed; intake's own limit (INTAKE_LIVE_MAX_MESSAGE_BYTES) is below it.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
SOCKETS: web.AppKey[set[web.WebSocketResponse]] = web.AppKey("websockets")
# Either end: aiohttp's server and client sockets share receive, send_str, send_bytes and close.
Socket = Any
_ENDS = (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR)


def is_upgrade(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


async def relay(
    request: web.Request, base: str, session: ClientSession, headers: Mapping[str, str]
) -> web.StreamResponse:
    url = base.replace("http", "ws", 1) + request.rel_url.raw_path_qs
    forwarded = CIMultiDict((k, v) for k, v in headers.items() if not k.lower().startswith("sec-websocket"))
    try:
        upstream = await session.ws_connect(url, headers=forwarded, max_msg_size=MAX_MESSAGE_BYTES)
    except (ClientError, OSError, asyncio.TimeoutError) as exc:
        log.warning("websocket upstream %s unreachable: %s", url, exc)
        return web.json_response(
            {"error": "upstream_unavailable", "message": "the service is starting or down; retry in a moment"},
            status=502,
        )
    client = web.WebSocketResponse(max_msg_size=MAX_MESSAGE_BYTES)
    await client.prepare(request)
    sockets = request.app[SOCKETS]
    sockets.add(client)
    try:
        down = asyncio.ensure_future(_pump(upstream, client))
        up = asyncio.ensure_future(_pump(client, upstream))
        done, pending = await asyncio.wait({down, up}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    finally:
        sockets.discard(client)
        await upstream.close()
        await client.close()
    return client


async def _pump(src: Socket, dst: Socket) -> None:
    """Messages from ``src`` to ``dst`` until ``src`` closes; then close ``dst`` the same way."""
    while True:
        msg = await src.receive()
        if msg.type == WSMsgType.TEXT:
            await dst.send_str(msg.data)
        elif msg.type == WSMsgType.BINARY:
            await dst.send_bytes(msg.data)
        elif msg.type in _ENDS:
            code = msg.data if msg.type == WSMsgType.CLOSE and isinstance(msg.data, int) else 1000
            reason = (msg.extra or "").encode() if msg.type == WSMsgType.CLOSE else b""
            await dst.close(code=code, message=reason)
            return


async def close_all(app: web.Application) -> None:
    sockets: set[web.WebSocketResponse] = app[SOCKETS]
    await asyncio.gather(*(ws.close(code=1001) for ws in list(sockets)), return_exceptions=True)


def setup(app: web.Application) -> None:
    sockets: set[web.WebSocketResponse] = set()
    app[SOCKETS] = sockets
    app.on_shutdown.append(close_all)
