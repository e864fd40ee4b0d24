"""The local front proxy: one origin that routes writes to intake and reads to edge.

On compose and k3s a real proxy (Caddy, Traefik) does this; ``streamtts up`` runs this one so
that a single process tree serves ``http://127.0.0.1:8080`` with nothing else installed.
"""

from __future__ import annotations

import asyncio
import io
import logging
import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import (
    BaseConnector,
    ClientError,
    ClientResponse,
    ClientSession,
    ClientTimeout,
    TCPConnector,
    UnixConnector,
    web,
)
from aiohttp.typedefs import Handler
from multidict import CIMultiDict
from redis.asyncio import Redis

from servicekit import ClientHolds, Refusal, add_security_headers, client_address, healthy, probe
from servicekit.crosssite import ALLOWED_HOSTS, host_allowed
from servicekit.errors import error_response

from . import routes, wsrelay
from .config import Config

log = logging.getLogger(__name__)

# Hop-by-hop headers are the proxy's own business, never forwarded (RFC 9110 7.6.1). A request's
# Content-Length is the client's (its body is sent again, in pieces); a response's is kept, with
# the range headers, so that a finished MP3 keeps its length and seeking through the proxy.
HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade",
}
REQUEST_HOP_BY_HOP = HOP_BY_HOP | {"content-length"}
# Bodies are buffered before they are relayed, each bounded as intake bounds it (Limits). At most
# MAX_BUFFERED bodies are held at once (64 MiB at intake's default size; past that 503 busy), and at
# most STREAMTTS_UPLOADS_PER_CLIENT of them one client's (429 beyond), so one address with many slow
# bodies cannot take every slot from the others.
MAX_BUFFERED = 64
# What the proxy calls itself: never aiohttp's name and version, nor a service's.
SERVER_NAME = "StreamTTS"
UPSTREAM_CONNECT_S = 5.0
UPSTREAM_CONNECTIONS = 2048  # SSE and MP3 streams that follow a cast each hold one
# How long /readyz waits for each service's own /readyz.
READY_PROBE_S = 2.0
# Seconds a client is told to wait while the system is not ready.
NOT_READY_RETRY_S = 2

# The probes answer whatever Host asks (a load balancer's checks name an address or nothing).
PROBES = frozenset({"/healthz", "/readyz"})


@dataclass(frozen=True)
class Limits:
    """Everything the local front door bounds (docs/security.md): ``up``'s own settings, and what
    intake takes, read from intake's settings, so that nothing intake would refuse is held here
    first: INTAKE_MAX_BODY_BYTES within INTAKE_BODY_TIMEOUT_S, INTAKE_LIVE_MAX_MESSAGE_BYTES."""
    settings: Config
    max_body_bytes: int
    body_timeout_s: float
    max_message_bytes: int
    max_buffered: int = MAX_BUFFERED


# Upstream -> the session that relays requests and upgrades to it (a Unix socket needs a connector of its own).
SESSIONS: web.AppKey[dict[str, ClientSession]] = web.AppKey("sessions")
REDIS = web.AppKey("redis", Redis)
LIMITS = web.AppKey("limits", Limits)
HOSTS: web.AppKey[frozenset[str]] = web.AppKey("hosts")


# The bodies being buffered: MAX_BUFFERED in all, STREAMTTS_UPLOADS_PER_CLIENT of them one client's.
UPLOADS = web.AppKey("uploads", ClientHolds)
# Requests and WebSockets being relayed: UPSTREAM_CONNECTIONS in all, STREAMTTS_PROXY_RELAYS_PER_CLIENT
# of them one client's, so that one address cannot hold every upstream connection.
RELAY_HOLDS = web.AppKey("relay_holds", ClientHolds)
# Upstream responses being relayed (at most UPSTREAM_CONNECTIONS): closed on shutdown, so that
# a stop does not wait shutdown_timeout for following streams (SSE, a growing MP3) that never end.
RELAYS: web.AppKey[set[ClientResponse]] = web.AppKey("relays")
# Upstream base URL -> whether it answered the last time (absent: never answered yet).
SEEN: web.AppKey[dict[str, bool]] = web.AppKey("seen")


# What the proxy asks a service on a Unix socket: the socket picks the service, the host names the
# loopback (an address literal passes every Host check; a client's own Host goes on as it was).
SOCKET_URL = "http://127.0.0.1"


def on_socket(upstream: str) -> bool:
    """Whether an upstream is a Unix socket's path (``streamtts up``) rather than a base URL."""
    return upstream.startswith("/")


def url_of(upstream: str) -> str:
    """The base URL of requests to an upstream."""
    return SOCKET_URL if on_socket(upstream) else upstream


def session_for(upstream: str, **kwargs: Any) -> ClientSession:
    """A client session whose connections go to ``upstream`` (a Unix socket or a base URL)."""
    connector: BaseConnector = (UnixConnector(upstream, limit=UPSTREAM_CONNECTIONS) if on_socket(upstream)
                                else TCPConnector(limit=UPSTREAM_CONNECTIONS))
    return ClientSession(connector=connector, **kwargs)


@dataclass(frozen=True)
class Upstreams:
    intake: str  # a base URL (http://127.0.0.1:8081), or the path of a Unix socket (streamtts up)
    edge: str

    def pick(self, method: str, path: str) -> str | None:
        """The base URL that answers ``method path`` (routes.TABLE), or None: not public."""
        service = routes.pick(method, path)
        return None if service == routes.HIDDEN else self.intake if service == routes.INTAKE else self.edge


UPSTREAMS = web.AppKey("upstreams", Upstreams)


async def readyz(request: web.Request) -> web.Response:
    """200 only when Redis answers, intake and edge are ready, and a worker's voices are published."""
    ready = await readiness(request.app)
    if not ready.waiting:
        return web.json_response({"status": "ok", "voices": ready.voices, "default": ready.default})
    return web.json_response(
        {"error": "not_ready", "message": f"waiting for {', '.join(ready.waiting)}; retry shortly",
         "waiting_for": ready.waiting},
        status=503, headers={"Retry-After": str(NOT_READY_RETRY_S)},
    )


@dataclass(frozen=True)
class Readiness:
    waiting: list[str]  # what is not ready yet, in words (empty: all is ready)
    voices: int = 0
    default: str | None = None


async def readiness(app: web.Application) -> Readiness:
    upstreams = app[UPSTREAMS]
    redis_ok, intake, edge = await asyncio.gather(healthy(app[REDIS]), *(
        ready_body(app[SESSIONS][base], base, app[SEEN]) for base in (upstreams.intake, upstreams.edge)))
    waiting = [name for name, ok in (("Redis", redis_ok), ("intake", intake is not None), ("edge", edge is not None))
               if not ok]
    voices = intake.get("voices") if intake else None
    if intake is not None and not voices:
        waiting.append("a worker's voices (the model is loading)")
    return Readiness(waiting, voices or 0, intake.get("default") if intake else None)


async def ready_body(session: ClientSession, base: str, seen: dict[str, bool] | None = None) -> dict[str, Any] | None:
    """A service's /readyz body when it answers 200, else None (the proxy's probes and the launcher's)."""
    try:
        async with session.get(url_of(base) + "/readyz", timeout=ClientTimeout(total=READY_PROBE_S)) as response:
            if seen is not None:
                seen.setdefault(base, True)  # it listens: from now on, a refusal means it is down
            if response.status != 200:
                return None
            body = await response.json()
            return body if isinstance(body, dict) else None
    except (ClientError, OSError, asyncio.TimeoutError, ValueError):
        return None


@web.middleware
async def _refusals(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The proxy's own refusals answered as the services answer theirs ({error, message}), and
    DNS rebinding: a name the origin was not told to answer to is refused (servicekit.crosssite)."""
    try:
        if request.path not in PROBES and not host_allowed(request.host, request.app[HOSTS]):
            raise Refusal(403, "unknown_host", f"this server does not answer to that host name; add it to "
                          f"{ALLOWED_HOSTS.env}")
        return await handler(request)
    except Refusal as refusal:
        return error_response(refusal)


async def forward(request: web.Request) -> web.StreamResponse:
    base = request.app[UPSTREAMS].pick(request.method, request.path)
    if base is None:
        raise Refusal(404, "not_found", "no such route here")
    holds, client = request.app[RELAY_HOLDS], client_address(request.remote, None, frozenset())
    refused = holds.take(client)
    if refused is not None:
        raise _too_many(refused, "too_many_relays", f"your address has {holds.per_client} requests or streams "
                        "open through this origin; close one first")
    try:
        return await _forward(request, base)
    finally:
        holds.give(client)


async def _forward(request: web.Request, base: str) -> web.StreamResponse:
    # Host goes on: intake compares a write's Origin with the origin the browser asked for. The
    # X-Forwarded-Host and -Proto a client sent are replaced, never believed: the services build
    # redirects (Location) from them.
    headers = end_to_end(request.headers, REQUEST_HOP_BY_HOP | {"x-forwarded-for", "x-forwarded-host",
                                                                "x-forwarded-proto"})
    peer = request.remote or ""
    prior = ", ".join(request.headers.getall("X-Forwarded-For", []))
    headers["X-Forwarded-For"] = f"{prior}, {peer}" if prior else peer
    headers["X-Forwarded-Host"] = request.host
    headers["X-Forwarded-Proto"] = request.scheme
    if wsrelay.is_upgrade(request.headers):
        try:
            upstream_ws = await wsrelay.connect(request, request.app[SESSIONS][base], url_of(base), headers)
        except wsrelay.UpgradeRefused as refused:  # the service's own answer: its status and body
            return web.Response(status=refused.status, reason=refused.reason, body=refused.body,
                                headers=end_to_end(refused.headers, HOP_BY_HOP | {"content-length"}))
        except (ClientError, OSError, asyncio.TimeoutError) as exc:
            raise _unreachable(request.app, base, exc) from None
        limits = request.app[LIMITS]
        return await wsrelay.relay(request, upstream_ws, limits.max_message_bytes,
                                   limits.settings.proxy_heartbeat_s, limits.settings.proxy_write_timeout_s, reset)
    try:
        body = await _buffered(request) if request.can_read_body else None
    except ConnectionResetError:  # the client went away while sending: nobody to answer, no error
        log.debug("client left during its body: %s %s", request.method, request.path)
        return web.Response(status=400)
    try:
        upstream = await request.app[SESSIONS][base].request(
            request.method,
            url_of(base) + request.rel_url.raw_path_qs,
            headers=headers,
            data=io.BytesIO(body) if body is not None else None,  # sent in pieces, never one big write
            allow_redirects=False,  # a 303 to /c/<id> is the client's to follow
            # no Content-Type of aiohttp's own where the client sent none (a missing one is meaningful)
            skip_auto_headers=() if "Content-Type" in request.headers else ("Content-Type",),
        )
    except (ClientError, OSError, asyncio.TimeoutError) as exc:
        raise _unreachable(request.app, base, exc) from None
    seen = request.app[SEEN]
    if seen.get(base) is False:
        log.info("upstream %s answers again", base)
    seen[base] = True
    relays = request.app[RELAYS]
    relays.add(upstream)
    try:
        async with upstream:
            return await _relay(request, upstream)
    finally:
        relays.discard(upstream)


def _too_many(refused: str, error: str, message: str) -> Refusal:
    """A client past its share (429 ``error``), or everyone's share taken (503 busy)."""
    if refused == "client":
        return Refusal(429, error, message, {"Retry-After": str(NOT_READY_RETRY_S)})
    return Refusal(503, "busy", "too many clients at once; retry in a moment", {"Retry-After": str(NOT_READY_RETRY_S)})


async def _buffered(request: web.Request) -> bytes:
    """The request's body, read within the time given while holding one of its client's slots."""
    uploads, client = request.app[UPLOADS], client_address(request.remote, None, frozenset())
    # Past half the slots, a client that holds one already is refused: a few addresses trickling
    # bodies then fill half of them, and each further address gets one at most.
    crowded = uploads.count >= uploads.total // 2 and uploads.held.get(client, 0) >= 1
    refused = "client" if crowded else uploads.take(client)
    if refused is not None:
        raise _too_many(refused, "too_many_uploads",
                        "your address is sending as many bodies at once as it may now; finish one first")
    limits = request.app[LIMITS]
    try:
        return await asyncio.wait_for(request.read(), limits.body_timeout_s)
    except web.HTTPRequestEntityTooLarge:
        raise Refusal(413, "body_too_large", f"the body is larger than {limits.max_body_bytes} bytes; send a "
                      "shorter text") from None
    except asyncio.TimeoutError:
        raise Refusal(408, "body_timeout", f"the body took longer than {limits.body_timeout_s:g} s; send it at once",
                      {"Connection": "close"}) from None
    finally:
        uploads.give(client)


def end_to_end(headers: Mapping[str, str], hop_by_hop: set[str]) -> CIMultiDict[str]:
    """The headers to pass on: every one, repeats kept, but the hop-by-hop ones and those the
    Connection header names (RFC 9110 7.6.1)."""
    named = {t.strip().lower() for v in headers.getall("Connection", []) for t in v.split(",")}  # type: ignore[attr-defined]
    kept: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        if name.lower() not in hop_by_hop and name.lower() not in named:
            kept.add(name, value)
    return kept


def _unreachable(app: web.Application, base: str, exc: BaseException) -> Refusal:
    """A service that has not answered yet is starting (503, retry); one that did is down (502,
    one warning until it answers again)."""
    seen = app[SEEN]
    if base not in seen:
        log.debug("upstream %s not listening yet: %s", base, exc)
        return Refusal(503, "starting", "StreamTTS is starting; retry in a moment",
                       {"Retry-After": str(NOT_READY_RETRY_S)})
    if seen[base]:
        log.warning("upstream %s unreachable: %s", base, exc)
        seen[base] = False
    return Refusal(502, "upstream_unavailable", "the service is down; retry in a moment")


async def _relay(request: web.Request, upstream: ClientResponse) -> web.StreamResponse:
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    response.headers.extend(end_to_end(upstream.headers, HOP_BY_HOP))
    write_timeout_s = request.app[LIMITS].settings.proxy_write_timeout_s
    try:
        await response.prepare(request)
        try:
            # stream as it arrives: SSE and a growing MP3 must not wait for the end
            async for chunk in upstream.content.iter_any():
                await asyncio.wait_for(response.write(chunk), write_timeout_s)
        except ClientError as exc:
            if isinstance(exc, ConnectionResetError):
                raise  # the client's side (aiohttp's ClientConnectionResetError): below
            if upstream in request.app[RELAYS]:
                raise  # the upstream failed mid-stream: cut the client's stream too, so it can tell
            # else _close_relays closed it: we are stopping, and end the stream cleanly
        await response.write_eof()
    except ConnectionResetError:
        # The client went away mid-stream (a closed tab, a stopped player): not an error.
        log.debug("client left %s %s", request.method, request.path)
    except asyncio.TimeoutError:
        log.debug("client stopped reading %s %s for %gs; cut", request.method, request.path, write_timeout_s)
        reset(request)
    return response


def reset(request: web.Request) -> None:
    """Cut a client that stopped reading with a reset: a close would leave the kernel sending what
    it holds for that socket (megabytes) until the client reads it or TCP gives up, long after."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def _name_the_server(request: web.Request, response: web.StreamResponse) -> None:
    """Every answer names this proxy, not aiohttp's version nor the service's that made it."""
    response.headers["Server"] = SERVER_NAME


async def _close_relays(app: web.Application) -> None:
    relays = app[RELAYS]
    while relays:
        relays.pop().close()
    sockets: set[web.WebSocketResponse] = app[wsrelay.SOCKETS]
    await asyncio.gather(*(ws.close(code=1001) for ws in list(sockets)), return_exceptions=True)  # going away


def create_app(redis: Redis, upstreams: Upstreams, limits: Limits,
               hosts: frozenset[str] = frozenset()) -> web.Application:
    """The proxy, bounded by ``limits``; a Host that names none of ``hosts`` is refused (empty: any).
    Serve it with ``doorway.serve`` (``runner`` below), which bounds connections before aiohttp."""
    app = web.Application(client_max_size=limits.max_body_bytes, middlewares=[_refusals])
    app[LIMITS] = limits
    app[HOSTS] = hosts
    app[UPLOADS] = ClientHolds(limits.max_buffered, limits.settings.uploads_per_client)
    app[RELAY_HOLDS] = ClientHolds(UPSTREAM_CONNECTIONS, limits.settings.proxy_relays_per_client)
    app.on_response_prepare.append(_name_the_server)
    app[REDIS] = redis
    app[UPSTREAMS] = upstreams
    app[RELAYS] = set()
    app[SEEN] = {}
    app.on_shutdown.append(_close_relays)
    add_security_headers(app)
    app[wsrelay.SOCKETS] = set()

    async def session_ctx(app: web.Application):  # type: ignore[no-untyped-def]
        timeout = ClientTimeout(total=None, connect=UPSTREAM_CONNECT_S, sock_read=None)
        bases = {upstreams.intake, upstreams.edge}
        app[SESSIONS] = {base: session_for(base, timeout=timeout, auto_decompress=False,
                                           response_class=wsrelay.UpgradeResponse) for base in bases}
        yield
        for session in app[SESSIONS].values():
            await session.close()

    app.cleanup_ctx.append(session_ctx)
    app.router.add_get("/healthz", probe())  # liveness: the proxy answers; whether the system can work is /readyz
    app.router.add_get("/readyz", readyz)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


def runner(app: web.Application, **kwargs: Any) -> web.AppRunner:
    """The app's runner, with the keep-alive timeout of its limits (aiohttp's own is an hour)."""
    return web.AppRunner(app, keepalive_timeout=app[LIMITS].settings.proxy_idle_s, **kwargs)
