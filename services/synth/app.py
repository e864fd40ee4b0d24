"""The synth process: a small HTTP app (``/metrics``, ``/healthz``, ``/readyz``) around the worker.

``create_app`` wires Redis with the service (model + worker), the stats poller and the archiver
as ``cleanup_ctx`` so that leaving the app stops them in order; ``serving(cfg)`` tells
servicekit's runner to run it until SIGTERM or SIGINT, or until the worker ends (exit 1 if it
failed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

from aiohttp import web
from redis.asyncio import Redis
from redis.exceptions import RedisError

from blobstore import open_blob_store
from fanout import stop_tasks
from servicekit import Serving, connect, json_errors, redact

from . import jobs, views
from .archiver import Archiver
from .config import SynthConfig
from .context import CONFIG, METRICS, SYNTH, Synth
from .metrics import SynthMetrics
from .service import Loader, SynthService, load_model

log = logging.getLogger(__name__)

# Codes of the errors aiohttp raises itself: synth serves nothing but its ops endpoints.
_HTTP_ERRORS = {
    404: ("not_found", "no such route: synth serves /healthz, /readyz and /metrics"),
    405: ("method_not_allowed", "use GET"),
}


def serving(cfg: SynthConfig) -> Serving:
    """``/metrics`` and the probes on SYNTH_METRICS_HOST:PORT; the process ends with the worker,
    and leaves at once after it (an inference thread still running must not hold the exit)."""
    return Serving("synth", cfg.metrics_host, cfg.metrics_port, cfg.grace_s,
                   until=lambda app: app[SYNTH].task, hard_exit=True)


def create_app(cfg: SynthConfig, *, load: Loader = load_model) -> web.Application:
    """The app; ``load`` builds the synthesizer (tests pass a stand-in)."""
    errors = json_errors(codes=_HTTP_ERRORS, unavailable="Redis does not answer; retry shortly",
                         internal="synth failed unexpectedly; see its log")
    app = web.Application(middlewares=[errors])
    app[CONFIG] = cfg
    app[METRICS] = SynthMetrics()
    app.cleanup_ctx.extend([_redis_and_service(load), _stats_ctx, _archiver_ctx])
    app.router.add_get("/metrics", app[METRICS].view)
    app.router.add_get("/healthz", views.healthz)
    app.router.add_get("/readyz", views.readyz)
    return app


def _redis_and_service(load: Loader) -> Callable[[web.Application], AsyncIterator[None]]:
    """Redis, then the service running on it; at the end the service stops, then Redis closes."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        cfg = app[CONFIG]
        redis = await connect(cfg.redis_url)
        log.info("connected to Redis at %s", redact(cfg.redis_url))
        service = SynthService(cfg, redis, load, app[METRICS])
        task = asyncio.create_task(service.run(), name="synth-service")
        app[SYNTH] = Synth(cfg=cfg, metrics=app[METRICS], redis=redis, service=service, task=task)
        yield
        await _stop(service, task, cfg.grace_s)
        await redis.aclose()

    return ctx


async def _stop(service: SynthService, task: asyncio.Task[None], grace_s: float) -> None:
    """The worker finishes the chunk in hand within ``grace_s``, else it is cancelled."""
    if not task.done():
        log.info("stopping: finishing the chunk in hand (grace %.0fs)", grace_s)
    service.stop()
    try:
        # shield: a timeout must not cancel the worker before we decide to
        await asyncio.wait_for(asyncio.shield(task), grace_s)
    except asyncio.TimeoutError:
        log.error("the worker did not stop within SYNTH_GRACE_S=%.0fs; cancelling it", grace_s)
        await stop_tasks(task)
    except Exception:  # noqa: BLE001 - already logged by serve(); cleanup must go on
        pass


async def _stats_ctx(app: web.Application) -> AsyncIterator[None]:
    synth = app[SYNTH]
    task = asyncio.create_task(poll_stats(synth.redis, synth.cfg.stats_interval_s, synth.metrics), name="synth-stats")
    yield
    await stop_tasks(task)


async def _archiver_ctx(app: web.Application) -> AsyncIterator[None]:
    """The archiver, when ARCHIVE_URL names a blob store (docs/design.md, "The archive")."""
    synth, cfg = app[SYNTH], app[CONFIG]
    if cfg.archive is None:
        yield
        return
    blobs = await open_blob_store(cfg.archive)
    archiver = Archiver(synth.redis, blobs, cfg.archiver, cfg.consumer, synth.metrics, poll_s=cfg.poll_s)
    task = asyncio.create_task(archiver.run(), name="synth-archiver")
    log.info("archiving finished casts to %s", blobs.url)
    yield
    await stop_tasks(task)  # the archiver's loop blocks on its receipts' read
    await blobs.close()


async def poll_stats(redis: Redis, interval_s: float, metrics: SynthMetrics) -> None:
    """Queue depth, consumer lag and Redis memory, every ``interval_s``."""
    while True:
        try:
            depth, lag = await jobs.queue_stats(redis)
            metrics.queue_depth.set(depth)
            metrics.consumer_lag.set(lag)
            info = await redis.info("memory")
            metrics.redis_used_memory.set(int(info["used_memory"]))
            metrics.redis_maxmemory.set(int(info.get("maxmemory", 0)))
        except RedisError as exc:
            log.warning("stats poll failed: %s", exc)
        await asyncio.sleep(interval_s)
