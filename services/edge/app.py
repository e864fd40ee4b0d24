"""``create_app(cfg)``: edge's aiohttp application, its Redis connections and its shared tail;
``serving(cfg)``: how ``python -m edge`` serves it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from blobstore import open_blob_store
from castlog import LogReader, RowCache
from durablestreams import DurableStreams
from durablestreams.openapi import durable_part
from fanout import Tail, stop_tasks
from servicekit import EdgeLimits, Serving, add_security_headers, connect, openapi_document, redact, serve_openapi
from servicekit.connect import tail_connection
from servicekit.errors import json_errors

from . import captions, docs, durable, mp3stream, sse, views
from .config import Config
from .context import CONFIG, EDGE, METRICS, Edge
from .errors import INTERNAL, STATUS_CODES, UNAVAILABLE
from .guards import Guard
from .layout import LayoutCache
from .metrics import EdgeMetrics
from .played import Played

log = logging.getLogger(__name__)

# The tail's connection name, so that CLIENT LIST shows which connection is edge's XREAD.
TAIL_CLIENT_NAME = "edge-tail"
# The tail's blocked read wakes through wake streams of its own: edge's Redis user has no CLIENT UNBLOCK.
WAKE_NAME = "edge"
# A request waits this long for a pooled connection before failing (a 500, logged).
POOL_WAIT_S = 10.0
# A plain read answers quickly (the tail's connection waits out its block time: tail_connection).
READ_SOCKET_TIMEOUT_S = 10.0
# Edge reads only: request bodies are never needed.
MAX_BODY_BYTES = 1024


def serving(cfg: Config) -> Serving:
    # handler_cancellation: a client that leaves frees its stream seat and listener at once,
    # not at the next heartbeat
    return Serving("edge", cfg.host, cfg.port, cfg.shutdown_timeout_s, handler_cancellation=True, path=cfg.socket)


def create_app(cfg: Config) -> web.Application:
    metrics = EdgeMetrics()
    errors = json_errors(codes=STATUS_CODES, unavailable=UNAVAILABLE, internal=INTERNAL, count=metrics.requests)
    app = web.Application(middlewares=[errors], client_max_size=MAX_BODY_BYTES)
    app[CONFIG] = cfg
    app[METRICS] = metrics
    app.cleanup_ctx.append(_redis_and_tail)
    app.on_shutdown.append(_close_streams)
    add_security_headers(app)
    app.router.add_get("/api/casts/{id}", views.cast_state)
    app.router.add_get("/api/casts/{id}/records", views.records)
    app.router.add_get("/api/casts/{id}/events", sse.events)
    app.router.add_get("/api/casts/{id}/audio.mp3", mp3stream.audio)
    app.router.add_get("/api/casts/{id}/captions", captions.captions)
    app.router.add_get("/s2/records", views.records)
    app.router.add_get("/healthz", views.healthz)
    app.router.add_get("/readyz", views.readyz)
    app.router.add_get("/", views.index_page)
    app.router.add_get("/docs", docs.docs_page)
    app.router.add_get(docs.ASSETS_PREFIX + "{name}", docs.docs_asset)
    app.router.add_get("/c/{id}", views.player_page)
    app.router.add_static("/static/", views.STATIC, append_version=False)
    serve_openapi(app.router, "/api/edge/openapi.json",
                  openapi_document(edge=EdgeLimits(cfg.max_records_limit, cfg.max_wait_s), parts=[durable_part()]))
    durable.setup(app)  # /v1/stream: Durable Streams reads
    if cfg.metrics_port:  # /metrics on a port of its own
        app.cleanup_ctx.append(_metrics_site)
    else:
        app.router.add_get("/metrics", metrics.view)
    return app


async def _redis_and_tail(app: web.Application) -> AsyncIterator[None]:
    cfg = app[CONFIG]
    redis = await connect(  # waits for Redis
        cfg.redis_url, attempts=cfg.redis_connect_attempts, max_connections=cfg.redis_pool,
        pool_timeout_s=POOL_WAIT_S, socket_timeout_s=READ_SOCKET_TIMEOUT_S,
    )
    conn = tail_connection(cfg.redis_url, TAIL_CLIENT_NAME, cfg.tail_block_ms)
    blobs = await open_blob_store(cfg.archive) if cfg.archive is not None else None
    reader = LogReader(redis, blobs, RowCache(redis, cfg.row_cache_bytes))
    tail = Tail(conn, redis, app[METRICS].tail, block_ms=cfg.tail_block_ms, batch=cfg.read_batch,
                queue_size=cfg.listener_queue, reader=reader, wake=WAKE_NAME)
    app[EDGE] = Edge(
        cfg=cfg, metrics=app[METRICS], redis=redis, tail=tail,
        guard=Guard(redis, cfg, app[METRICS]), layouts=LayoutCache(cfg.layout_cache, reader),
        reader=reader, played=Played(redis, cfg.played_flush_s),
        durable=DurableStreams(redis), ds_waiters=asyncio.Semaphore(cfg.ds_max_waiters),
    )
    tail.start()
    renewals = asyncio.create_task(app[EDGE].guard.seats.renew_forever(), name="stream-seat-renewals")
    played = asyncio.create_task(app[EDGE].played.flush_forever(), name="played-flush")
    log.info("edge reading %s", redact(cfg.redis_url))
    try:
        yield
    finally:
        await stop_tasks(renewals, played)
        await app[EDGE].played.flush()  # the reads since the last flush still count
        await tail.stop()
        await app[EDGE].guard.seats.drain()  # streams closed at shutdown give their seats back
        await conn.aclose()
        await redis.aclose()  # closes its pool too
        if blobs is not None:
            await blobs.close()


async def _metrics_site(app: web.Application) -> AsyncIterator[None]:
    """``/metrics`` on EDGE_METRICS_PORT, a port the public ingress does not route."""
    cfg = app[CONFIG]
    metrics_app = web.Application()
    metrics_app.router.add_get("/metrics", app[METRICS].view)
    runner = web.AppRunner(metrics_app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, cfg.host, cfg.metrics_port).start()
    log.info("edge metrics on http://%s:%d/metrics", cfg.host, cfg.metrics_port)
    try:
        yield
    finally:
        await runner.cleanup()


async def _close_streams(app: web.Application) -> None:
    """Graceful stop: end every streaming response now, each with an id its client resumes from."""
    if EDGE in app:
        app[EDGE].tail.close_listeners()
