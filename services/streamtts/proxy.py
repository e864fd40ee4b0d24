"""The local front proxy: one origin that routes writes to intake and reads to edge.

On compose and k3s a real proxy (Caddy, Traefik) does this; ``streamtts up`` runs this one so
that a single process tree serves ``http://127.0.0.1:8080`` with nothing else installed.
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import ClientError, ClientResponse, ClientSession, ClientTimeout, TCPConnector, web
from aiohttp.typedefs import Handler
from multidict import CIMultiDict
from redis.asyncio import Redis

from servicekit import ClientHolds, add_security_headers, client_address, healthy
from servicekit.crosssite import ALLOWED_HOSTS, host_allowed

from . import routes, wsrelay

log = logging.getLogger(__name__)

# Hop-by-hop headers are the proxy's own business, never forwarded (RFC 9110 7.6.1). A request's
# Content-Length is the client's (its body is sent again, in pieces); a response's is kept, with
# the range headers, so that a finished MP3 keeps its length and seeking through the proxy.
HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade",
}
REQUEST_HOP_BY_HOP = HOP_BY_HOP | {"content-length"}
# Bodies are buffered before they are relayed: the launcher sets these to INTAKE_MAX_BODY_BYTES and
# INTAKE_BODY_TIMEOUT_S, so the proxy takes what intake takes, in the time intake gives. At most
# MAX_BUFFERED bodies are held at once (64 MiB at the default size; past that 503 busy), and at most
# UPLOADS_PER_CLIENT of them one client's (429 beyond; `up` passes its setting), so one address with
# many slow bodies cannot take every slot from the others.
MAX_BODY_BYTES = 1024 * 1024
MAX_BUFFERED = 64
UPLOADS_PER_CLIENT = 8
BODY_TIMEOUT_S = 10.0
UPSTREAM_CONNECT_S = 5.0
UPSTREAM_CONNECTIONS = 2048  # live SSE and MP3 streams each hold one
# How long /readyz waits for each service's own /readyz.
READY_PROBE_S = 2.0
# Seconds a client is told to wait while the system is not ready.
NOT_READY_RETRY_S = 2

# The probes answer whatever Host asks (a load balancer's checks name an address or nothing).
PROBES = frozenset({"/healthz", "/readyz"})

SESSION = web.AppKey("session", ClientSession)
REDIS = web.AppKey("redis", Redis)
MAX_BODY = web.AppKey("max_body_bytes", int)
BODY_TIMEOUT = web.AppKey("body_timeout_s", float)
HOSTS: web.AppKey[frozenset[str]] = web.AppKey("hosts")


# The bodies being buffered: MAX_BUFFERED in all, UPLOADS_PER_CLIENT of them one client's.
UPLOADS = web.AppKey("uploads", ClientHolds)
# Upstream responses being relayed (at most UPSTREAM_CONNECTIONS): closed on shutdown, so that
# a stop does not wait shutdown_timeout for live streams (SSE, live MP3) that never end.
RELAYS: web.AppKey[set[ClientResponse]] = web.AppKey("relays")
# Upstream base URL -> whether it answered the last time (absent: never answered yet).
SEEN: web.AppKey[dict[str, bool]] = web.AppKey("seen")


@dataclass(frozen=True)
class Upstreams:
    intake: str  # base URL, e.g. http://127.0.0.1:8081
    edge: str

    def pick(self, method: str, path: str) -> str | None:
        """The base URL that answers ``method path`` (routes.TABLE), or None: not public."""
        service = routes.pick(method, path)
        return None if service == routes.HIDDEN else self.intake if service == routes.INTAKE else self.edge


UPSTREAMS = web.AppKey("upstreams", Upstreams)


async def healthz(request: web.Request) -> web.Response:
    """Liveness: the proxy answers. Whether the system can do its work is /readyz."""
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """200 only when Redis answers, intake and edge are ready, and a worker's voices are published."""
    ready = await readiness(request.app)
    if ready.ok:
        return web.json_response({"status": "ok", "voices": ready.voices, "default": ready.default})
    return web.json_response(
        {"error": "not_ready", "message": f"waiting for {', '.join(ready.waiting)}; retry shortly",
         "waiting_for": ready.waiting},
        status=503, headers={"Retry-After": str(NOT_READY_RETRY_S)},
    )


@dataclass(frozen=True)
class Readiness:
    waiting: list[str]  # what is not ready yet, in words
    voices: int = 0
    default: str | None = None

    @property
    def ok(self) -> bool:
        return not self.waiting


async def readiness(app: web.Application) -> Readiness:
    upstreams = app[UPSTREAMS]
    redis_ok, intake, edge = await asyncio.gather(
        healthy(app[REDIS]), _probe(app, upstreams.intake), _probe(app, upstreams.edge)
    )
    waiting = [name for name, ok in (("Redis", redis_ok), ("intake", intake is not None), ("edge", edge is not None))
               if not ok]
    voices = intake.get("voices") if intake else None
    if intake is not None and not voices:
        waiting.append("a worker's voices (the model is loading)")
    return Readiness(waiting, voices or 0, intake.get("default") if intake else None)


async def _probe(app: web.Application, base: str) -> dict[str, Any] | None:
    """A service's /readyz body when it answers 200, else None."""
    try:
        async with app[SESSION].get(base + "/readyz", timeout=ClientTimeout(total=READY_PROBE_S)) as response:
            app[SEEN].setdefault(base, True)  # it listens: from now on, a refusal means it is down
            if response.status != 200:
                return None
            body = await response.json()
            return body if isinstance(body, dict) else None
    except (ClientError, OSError, asyncio.TimeoutError, ValueError):
        return None


@web.middleware
async def _known_host(request: web.Request, handler: Handler) -> web.StreamResponse:
    """DNS rebinding: a name the origin was not told to answer to is refused (servicekit.crosssite)."""
    if request.path not in PROBES and not host_allowed(request.host, request.app[HOSTS]):
        return web.json_response(
            {"error": "unknown_host", "message": "this server does not answer to that host name; "
             f"add it to {ALLOWED_HOSTS.env}"}, status=403)
    return await handler(request)


async def forward(request: web.Request) -> web.StreamResponse:
    base = request.app[UPSTREAMS].pick(request.method, request.path)
    if base is None:
        return web.json_response({"error": "not_found", "message": "no such route here"}, status=404)
    # Host goes on: intake compares a write's Origin with the origin the browser asked for
    headers = end_to_end(request.headers, REQUEST_HOP_BY_HOP | {"x-forwarded-for"})
    peer = request.remote or ""
    prior = ", ".join(request.headers.getall("X-Forwarded-For", []))
    headers["X-Forwarded-For"] = f"{prior}, {peer}" if prior else peer
    headers.setdefault("X-Forwarded-Host", request.host)
    headers.setdefault("X-Forwarded-Proto", request.scheme)
    if wsrelay.is_upgrade(request):
        return await wsrelay.relay(request, base, request.app[SESSION], headers)
    try:
        body = await _buffered(request) if request.can_read_body else None
    except _Refused as refused:
        return refused.response
    except ConnectionResetError:  # the client went away while sending: nobody to answer, no error
        log.debug("client left during its body: %s %s", request.method, request.path)
        return web.Response(status=400)
    except web.HTTPRequestEntityTooLarge:
        return web.json_response(
            {"error": "body_too_large",
             "message": f"the body is larger than {request.app[MAX_BODY]} bytes; send a shorter text"},
            status=413,
        )
    except asyncio.TimeoutError:
        return web.json_response(
            {"error": "body_timeout", "message": f"the body took longer than {request.app[BODY_TIMEOUT]:g} s; send it at once"},
            status=408, headers={"Connection": "close"})
    try:
        upstream = await request.app[SESSION].request(
            request.method,
            base + request.rel_url.raw_path_qs,
            headers=headers,
            data=io.BytesIO(body) if body is not None else None,  # sent in pieces, never one big write
            allow_redirects=False,  # a 303 to /c/<id> is the client's to follow
            # no Content-Type of aiohttp's own where the client sent none (a missing one is meaningful)
            skip_auto_headers=() if "Content-Type" in request.headers else ("Content-Type",),
        )
    except (ClientError, OSError, asyncio.TimeoutError) as exc:
        return _unreachable(request.app, base, exc)
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


class _Refused(Exception):
    def __init__(self, response: web.Response) -> None:
        self.response = response


async def _buffered(request: web.Request) -> bytes:
    """The request's body, read within the time given while holding one of its client's slots."""
    uploads, client = request.app[UPLOADS], client_address(request.remote, None, frozenset())
    refused = uploads.take(client)
    if refused == "client":
        raise _Refused(web.json_response(
            {"error": "too_many_uploads", "message": f"your address is sending {uploads.per_client} bodies at once; "
             "finish one first"}, status=429, headers={"Retry-After": str(NOT_READY_RETRY_S)}))
    if refused == "total":
        raise _Refused(web.json_response({"error": "busy", "message": "too many uploads at once; retry in a moment"},
                                         status=503, headers={"Retry-After": str(NOT_READY_RETRY_S)}))
    try:
        return await asyncio.wait_for(request.read(), request.app[BODY_TIMEOUT])
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


def _unreachable(app: web.Application, base: str, exc: BaseException) -> web.Response:
    """A service that has not answered yet is starting (503, retry); one that did is down (502,
    one warning until it answers again)."""
    seen = app[SEEN]
    if base not in seen:
        log.debug("upstream %s not listening yet: %s", base, exc)
        return web.json_response(
            {"error": "starting", "message": "StreamTTS is starting; retry in a moment"},
            status=503, headers={"Retry-After": str(NOT_READY_RETRY_S)},
        )
    if seen[base]:
        log.warning("upstream %s unreachable: %s", base, exc)
        seen[base] = False
    return web.json_response(
        {"error": "upstream_unavailable", "message": "the service is down; retry in a moment"}, status=502
    )


async def _relay(request: web.Request, upstream: ClientResponse) -> web.StreamResponse:
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    response.headers.extend(end_to_end(upstream.headers, HOP_BY_HOP))
    try:
        await response.prepare(request)
        try:
            # stream as it arrives: SSE and live MP3 must not wait for the end
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
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
    return response


async def _close_relays(app: web.Application) -> None:
    relays = app[RELAYS]
    while relays:
        relays.pop().close()


def create_app(
    redis: Redis, upstreams: Upstreams, max_body_bytes: int = MAX_BODY_BYTES, hosts: frozenset[str] = frozenset(),
    max_buffered: int = MAX_BUFFERED, body_timeout_s: float = BODY_TIMEOUT_S,
    uploads_per_client: int = UPLOADS_PER_CLIENT,
) -> web.Application:
    """The proxy; a Host that names none of ``hosts`` is refused (empty: any). It buffers at most
    ``max_buffered`` bodies at once, ``uploads_per_client`` of them from one client."""
    app = web.Application(client_max_size=max_body_bytes, middlewares=[_known_host])
    app[MAX_BODY] = max_body_bytes
    app[BODY_TIMEOUT] = body_timeout_s
    app[HOSTS] = hosts
    app[UPLOADS] = ClientHolds(max_buffered, uploads_per_client)
    app[REDIS] = redis
    app[UPSTREAMS] = upstreams
    app[RELAYS] = set()
    app[SEEN] = {}
    app.on_shutdown.append(_close_relays)
    add_security_headers(app)
    wsrelay.setup(app)

    async def session_ctx(app: web.Application):  # type: ignore[no-untyped-def]
        timeout = ClientTimeout(total=None, connect=UPSTREAM_CONNECT_S, sock_read=None)
        app[SESSION] = ClientSession(
            timeout=timeout, connector=TCPConnector(limit=UPSTREAM_CONNECTIONS), auto_decompress=False
        )
        yield
        await app[SESSION].close()

    app.cleanup_ctx.append(session_ctx)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app
