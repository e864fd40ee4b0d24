"""The synth process: a small HTTP app (``/metrics``, ``/healthz``, ``/readyz``) around the worker.

``create_app`` wires Redis, the service (model + worker) and the stats poller as ``cleanup_ctx``
so that leaving the app stops them in order; ``serving(cfg)`` tells servicekit's runner to run
it until SIGTERM or SIGINT, or until the worker ends (exit 1 if it failed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from aiohttp import web
from redis.asyncio import Redis
from redis.exceptions import RedisError

from blobstore import open_store
from servicekit import Serving, connect, json_errors, redact

from . import jobs, views
from .archiver import Archiver
from .config import SynthConfig
from .context import CONFIG, LOADER, METRICS, REDIS, SERVICE, SERVICE_TASK
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
    return Serving("synth", cfg.metrics_host, cfg.metrics_port, cfg.grace_s, until=SERVICE_TASK, hard_exit=True)


def create_app(cfg: SynthConfig, *, load: Loader = load_model) -> web.Application:
    """The app; ``load`` builds the synthesizer (tests pass a stand-in)."""
    errors = json_errors(codes=_HTTP_ERRORS, unavailable="Redis does not answer; retry shortly",
                         internal="synth failed unexpectedly; see its log")
    app = web.Application(middlewares=[errors])
    app[CONFIG] = cfg
    app[LOADER] = load
    app[METRICS] = SynthMetrics()
    app.cleanup_ctx.extend([_redis_ctx, _service_ctx, _stats_ctx, _archiver_ctx])
    app.router.add_get("/metrics", app[METRICS].view)
    app.router.add_get("/healthz", views.healthz)
    app.router.add_get("/readyz", views.readyz)
    return app


async def _redis_ctx(app: web.Application) -> AsyncIterator[None]:
    cfg = app[CONFIG]
    app[REDIS] = await connect(cfg.redis_url)
    log.info("connected to Redis at %s", redact(cfg.redis_url))
    yield
    await app[REDIS].aclose()


async def _service_ctx(app: web.Application) -> AsyncIterator[None]:
    cfg = app[CONFIG]
    service = SynthService(cfg, app[REDIS], app[LOADER], app[METRICS])
    app[SERVICE] = service
    app[SERVICE_TASK] = asyncio.create_task(service.run(), name="synth-service")
    yield
    task = app[SERVICE_TASK]
    if not task.done():
        log.info("stopping: finishing the chunk in hand (grace %.0fs)", cfg.grace_s)
    service.stop()
    try:
        # shield: a timeout must not cancel the worker before we decide to
        await asyncio.wait_for(asyncio.shield(task), cfg.grace_s)
    except asyncio.TimeoutError:
        log.error("the worker did not stop within SYNTH_GRACE_S=%.0fs; cancelling it", cfg.grace_s)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    except Exception:  # noqa: BLE001 - already logged by serve(); cleanup must go on
        pass


async def _stats_ctx(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(poll_stats(app[REDIS], app[CONFIG].stats_interval_s, app[METRICS]), name="synth-stats")
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _archiver_ctx(app: web.Application) -> AsyncIterator[None]:
    """The archiver, when ARCHIVE_URL names a store (docs/design.md, "The archive")."""
    cfg = app[CONFIG]
    if cfg.archive is None:
        yield
        return
    store = await open_store(cfg.archive)
    archiver = Archiver(app[REDIS], store, cfg.archiver, cfg.consumer, app[METRICS])
    task = asyncio.create_task(archiver.run(), name="synth-archiver")
    log.info("archiving finished casts to %s", store.url)
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await store.close()


async def poll_stats(redis: Redis, interval_s: float, metrics: SynthMetrics) -> None:
    """Queue depth, consumer lag and Redis memory, every ``interval_s``."""
    while True:
        try:
            depth, lag = await jobs.queue_stats(redis)
            metrics.queue_depth.set(depth)
            metrics.consumer_lag.set(lag)
            info = await redis.info("memory")
            metrics.redis_used_memory.set(int(info["used_memory"]))
        except RedisError as exc:
            log.warning("stats poll failed: %s", exc)
        await asyncio.sleep(interval_s)
