"""The synth process: a small HTTP app (``/metrics``, ``/healthz``) around the worker.

``create_app`` wires Redis, the service (model + worker) and the stats poller as ``cleanup_ctx``
so that leaving the app stops them in order; ``serve`` runs it until SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator

from aiohttp import web
from redis.asyncio import Redis
from redis.exceptions import RedisError

import servicekit
from blobstore import open_store

from . import jobs, metrics
from .archiver import Archiver
from .config import SynthConfig
from .service import Loader, SynthService, load_model

log = logging.getLogger(__name__)

CONFIG = web.AppKey("config", SynthConfig)
LOADER: web.AppKey[Loader] = web.AppKey("loader")
REDIS = web.AppKey("redis", Redis)
SERVICE = web.AppKey("service", SynthService)
SERVICE_TASK: web.AppKey[asyncio.Task[None]] = web.AppKey("service_task")


_NOT_READY = {
    "loading": "the model is loading; retry in a few seconds",
    "warming": "the model is warming up; retry in a few seconds",
    "stopped": "the worker is stopping",
    "failed": "the worker failed to start; see its log",
}


def create_app(cfg: SynthConfig, *, load: Loader = load_model) -> web.Application:
    """The app; ``load`` builds the synthesizer (tests pass a stand-in)."""
    app = web.Application()
    app[CONFIG] = cfg
    app[LOADER] = load
    app.cleanup_ctx.extend([_redis_ctx, _service_ctx, _stats_ctx, _archiver_ctx])
    app.router.add_get("/metrics", metrics_view)
    app.router.add_get("/healthz", healthz_view)
    app.router.add_get("/readyz", readyz_view)
    return app


async def _redis_ctx(app: web.Application) -> AsyncIterator[None]:
    cfg = app[CONFIG]
    app[REDIS] = await servicekit.connect(cfg.redis_url)
    log.info("connected to Redis at %s", servicekit.redact(cfg.redis_url))
    yield
    await app[REDIS].aclose()


async def _service_ctx(app: web.Application) -> AsyncIterator[None]:
    cfg = app[CONFIG]
    service = SynthService(cfg, app[REDIS], app[LOADER])
    app[SERVICE] = service
    app[SERVICE_TASK] = asyncio.create_task(service.run(), name="synth-service")
    yield
    service.stop()
    task = app[SERVICE_TASK]
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
    task = asyncio.create_task(poll_stats(app[REDIS], app[CONFIG].stats_interval_s), name="synth-stats")
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
    archiver = Archiver(app[REDIS], store, cfg.archiver, cfg.consumer)
    task = asyncio.create_task(archiver.run(), name="synth-archiver")
    log.info("archiving finished casts to %s", store.url)
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await store.close()


async def poll_stats(redis: Redis, interval_s: float) -> None:
    """Queue depth, consumer lag and Redis memory, every ``interval_s``."""
    while True:
        try:
            depth, lag = await jobs.queue_stats(redis)
            metrics.QUEUE_DEPTH.set(depth)
            metrics.CONSUMER_LAG.set(lag)
            info = await redis.info("memory")
            metrics.REDIS_USED_MEMORY.set(int(info["used_memory"]))
        except RedisError as exc:
            log.warning("stats poll failed: %s", exc)
        await asyncio.sleep(interval_s)


async def metrics_view(request: web.Request) -> web.Response:
    body, content_type = metrics.exposition()
    return web.Response(body=body, headers={"Content-Type": content_type})


async def healthz_view(request: web.Request) -> web.Response:
    """Liveness: 200 while the process loads, warms or runs its worker; 503 once it failed or
    stopped (a liveness probe restarts it). Readiness is /readyz."""
    phase = request.app[SERVICE].phase
    if phase in ("failed", "stopped"):
        return web.json_response({"error": phase, "message": _NOT_READY[phase]}, status=503)
    return web.json_response({"status": "ok", "phase": phase, "consumer": request.app[CONFIG].consumer})


async def readyz_view(request: web.Request) -> web.Response:
    """200 once the model is warm and Redis answers; 503 with the reason otherwise."""
    app = request.app
    service = app[SERVICE]
    if service.phase != "running":
        return web.json_response({"error": service.phase, "message": _NOT_READY[service.phase]}, status=503)
    if not await servicekit.healthy(app[REDIS]):
        return web.json_response(
            {"error": "redis_unreachable", "message": "Redis does not answer; check REDIS_URL"}, status=503
        )
    worker = service.worker
    return web.json_response(
        {
            "status": "ok",
            "consumer": app[CONFIG].consumer,
            "backend": service.synthesizer.name if service.synthesizer else None,
            "active_casts": len(worker.casts) if worker else 0,
        }
    )


async def serve(cfg: SynthConfig, *, load: Loader = load_model) -> int:
    """Run until SIGTERM/SIGINT or until the worker fails; the process's exit status."""
    app = create_app(cfg, load=load)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, cfg.metrics_host, cfg.metrics_port)
    await site.start()
    log.info("metrics on http://%s:%d/metrics", cfg.metrics_host, cfg.metrics_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    task = app[SERVICE_TASK]
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if stop.is_set():
        log.info("stopping: finishing the chunk in hand (grace %.0fs)", cfg.grace_s)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(sig)
    await runner.cleanup()
    if task.done() and not task.cancelled() and task.exception() is not None:
        log.error("the worker failed", exc_info=task.exception())
        return 1
    return 0

