"""The intake app: the claim side's routes and the speech room's (``speech.add_routes``: the one
import of that room here), the Redis lifetime, servicekit's error middleware (with OpenAI's error
shape on ``/v1/*``) and the API keys' check; ``serving(cfg)``: how ``python -m intake`` serves it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from aiohttp import web
from aiohttp.typedefs import Handler

from blobstore import open_blob_store
from castlog import (
    INTAKE_SCOPE,
    INTAKE_SESSIONS_SCOPE,
    INTAKE_SPEECH_SCOPE,
    INTAKE_TEXT_SCOPE,
    CastStore,
    LiveStore,
    LogReader,
    RateLimiter,
    RowCache,
)
from castlog.reader import FOLLOW_BLOCK_MS
from castlog.slots import SeatLimiter
from durablestreams import DurableStreams
from durablestreams.openapi import durable_part
from fanout import Tail, stop_tasks
from servicekit import (
    ClientHolds,
    IntakeLimits,
    Refusal,
    Serving,
    add_security_headers,
    connect,
    cross_site_guard,
    json_errors,
    openapi_document,
    redact,
    request_client,
    serve_openapi,
)
from servicekit.connect import tail_connection
from servicekit.keys import bearer_key

from . import cancel, durable, live, speech, views
from .config import Config
from .context import CONFIG, INTAKE, METRICS, Intake
from .limits import AuthFailures, Cooldowns, DurableQuota, InflightGate
from .metrics import Metrics
from .plan import Planner
from .speech.session import MAX_WAITING
from .voices import VoiceBook

log = logging.getLogger(__name__)

# Error codes and what to do, for the HTTP errors aiohttp raises itself (routing).
_HTTP_ERRORS = {
    404: ("not_found", "no such route; see GET /api/openapi.json"),
    405: ("method_not_allowed", "this route does not take that method; see the Allow header"),
}
# Pooled Redis connections beyond the submits' own: reads of the voice list, health checks.
POOL_HEADROOM = 16
# The shared tail's connection name, so that CLIENT LIST shows which connection is intake's XREAD.
TAIL_CLIENT_NAME = "intake-tail"
# The tail's blocked read wakes through wake streams of its own: intake's Redis user has no CLIENT UNBLOCK.
WAKE_NAME = "intake"
# The probes and the scrape: a cluster calls them by the pod's address, from no page.
PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
# Routes that want `Authorization: Bearer <key>` when STREAMTTS_API_KEYS is set (and /v1/*).
SUBMIT_PATHS = ("/api/casts", "/generate")


def create_app(cfg: Config) -> web.Application:
    """The intake app for ``cfg``; Redis is connected on start-up and closed on clean-up."""
    metrics = Metrics()
    errors = json_errors(
        codes=_HTTP_ERRORS, unavailable="the queue is unreachable; retry shortly",
        internal="intake failed unexpectedly; retry, and report it if it persists", count=metrics.requests,
        shape=speech.refusal_response,  # OpenAI's and Deepgram's shapes on /v1/*
    )
    guard = cross_site_guard(cfg.allowed_hosts, cfg.allowed_origins, exempt=PROBE_PATHS.__contains__)
    app = web.Application(client_max_size=cfg.max_body_bytes, middlewares=[errors, guard, _auth])
    app[CONFIG] = cfg
    app[METRICS] = metrics
    limits = IntakeLimits(cfg.max_chars, cfg.max_title_chars, cfg.max_body_bytes)
    app.cleanup_ctx.append(_redis_ctx)
    add_security_headers(app)
    app.router.add_post("/api/casts", views.post_cast)
    app.router.add_post("/generate", views.post_generate)
    app.router.add_get("/api/voices", views.get_voices)
    serve_openapi(app.router, "/api/openapi.json", openapi_document(intake=limits, parts=[durable_part()]))
    app.router.add_get("/healthz", views.get_healthz)
    app.router.add_get("/readyz", views.get_readyz)
    app.router.add_get("/metrics", metrics.view)
    app.router.add_post("/api/casts/{id}/text", live.post_text)
    app.router.add_post("/api/casts/{id}/close", live.post_close)
    app.router.add_delete("/api/casts/{id}", views.delete_cast)
    app.router.add_post("/api/casts/{id}/cancel", cancel.post_cancel)
    speech.add_routes(app)
    durable.setup(app)  # /v1/stream: Durable Streams writes
    return app


def serving(cfg: Config) -> Serving:
    """Until SIGINT/SIGTERM: then stop accepting, let in-flight submits finish, close Redis."""
    return Serving("intake", cfg.host, cfg.port, cfg.shutdown_timeout_s, path=cfg.socket)


async def _redis_ctx(app: web.Application) -> AsyncIterator[None]:
    cfg = app[CONFIG]
    # each speech stream and live session may hold one connection for a moment (an offset read)
    pool = cfg.max_inflight + POOL_HEADROOM + cfg.live_max_sessions + cfg.max_speech_streams
    redis = await connect(cfg.redis_url, attempts=cfg.redis_connect_attempts, max_connections=pool)
    log.info("intake using Redis at %s", redact(cfg.redis_url))
    conn = tail_connection(cfg.redis_url, TAIL_CLIENT_NAME, FOLLOW_BLOCK_MS)  # the shared tail's one blocking read
    blobs = await open_blob_store(cfg.archive) if cfg.archive is not None else None
    reader = LogReader(redis, blobs, RowCache(redis, cfg.row_cache_bytes))
    tail = Tail(conn, redis, app[METRICS].tail, reader=reader, wake=WAKE_NAME)
    app[INTAKE] = Intake(
        cfg=cfg, metrics=app[METRICS], redis=redis, store=CastStore(redis, replicas=cfg.wait_replicas, wait_ms=cfg.wait_timeout_ms),
        live=LiveStore(redis, cfg.content_key.encode(), replicas=cfg.wait_replicas, wait_ms=cfg.wait_timeout_ms),
        reader=reader, limiter=RateLimiter(redis, INTAKE_SCOPE, cfg.rate, cfg.burst),
        cooldowns=Cooldowns(), voices=VoiceBook(redis, cfg.voices_refresh_s, cfg.default_voice),
        gate=InflightGate(cfg.max_inflight, cfg.max_waiting), planner=Planner(budget_s=cfg.plan_budget_s),
        tail=tail,
        speech_permits=asyncio.Semaphore(cfg.max_speech_streams), speech_streams=set(), live_sessions=set(),
        durable=DurableStreams(redis, cfg.ds_max_stream_bytes),
        ds_quota=None if cfg.api_keys else DurableQuota(redis, cfg.ds_streams_per_client, cfg.ds_bytes_per_client),
        text_limiter=RateLimiter(redis, INTAKE_TEXT_SCOPE, cfg.live_chars_per_min / 60, cfg.live_chars_per_min),
        session_seats=SeatLimiter(redis, INTAKE_SESSIONS_SCOPE, cfg.live_sessions_per_client),
        speech_seats=SeatLimiter(redis, INTAKE_SPEECH_SCOPE, cfg.speech_streams_per_client),
        auth_failures=AuthFailures(redis, app[METRICS], cfg.auth_failures_per_min),
        session_waiting=ClientHolds(MAX_WAITING, cfg.sessions_waiting_per_client),
        # only the per-client share binds: no more clients than sessions hold ports (the range's own
        # bound is a bind that fails, 503 `busy`)
        webrtc_ports=ClientHolds(cfg.live_max_sessions * cfg.webrtc_ports_per_client, cfg.webrtc_ports_per_client),
    )
    tail.start()
    leased = (app[INTAKE].session_seats, app[INTAKE].speech_seats)
    renewers = [asyncio.ensure_future(s.renew_forever()) for s in leased]
    try:
        yield
    finally:
        await stop_tasks(*renewers)
        for seats in leased:
            await seats.drain()  # sessions ended at shutdown give their seats back
        await tail.stop()
        await conn.aclose()
    if blobs is not None:
        await blobs.close()
    await redis.aclose()




@web.middleware
async def _auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    cfg = request.app[CONFIG]
    if cfg.api_keys and (request.path.startswith(speech.V1_PREFIX) or request.path in SUBMIT_PATHS):
        failures = request.app[INTAKE].auth_failures
        client = request_client(request, cfg.forwarded_allow_ips)
        failures.check(client)
        if not bearer_key(request, cfg.api_keys):  # or Token: Deepgram's clients (/v1/speak)
            if "Authorization" in request.headers:  # a key given and wrong: a guess
                await failures.failed(client, "api_key")
            raise Refusal(401, "invalid_api_key", "send a key of STREAMTTS_API_KEYS as Authorization: Bearer <key>")
    return await handler(request)
