"""Synth's HTTP handlers: the ops endpoints around the worker (``/metrics`` is the registry's own)."""

from __future__ import annotations

from aiohttp import web

from servicekit import Problem, probe, redis_answers
from servicekit.answers import Health

from .context import SYNTH

_NOT_READY = {
    "loading": "the model is loading; retry in a few seconds",
    "warming": "the model is warming up; retry in a few seconds",
    "stopped": "the worker is stopping",
    "failed": "the worker failed to start; see its log",
}


async def _alive(app: web.Application) -> Problem | None:
    phase = app[SYNTH].service.phase
    return Problem(phase, _NOT_READY[phase]) if phase in ("failed", "stopped") else None


async def _running(app: web.Application) -> Problem | None:
    phase = app[SYNTH].service.phase
    return Problem(phase, _NOT_READY[phase]) if phase != "running" else None


async def _phase(app: web.Application) -> Health:
    synth = app[SYNTH]
    return Health(status="ok", phase=synth.service.phase, consumer=synth.cfg.consumer)


async def _worker(app: web.Application) -> Health:
    synth = app[SYNTH]
    service, worker = synth.service, synth.service.worker
    return Health(
        status="ok",
        consumer=synth.cfg.consumer,
        backend=service.synthesizer.name if service.synthesizer else None,
        active_casts=len(worker.casts) if worker else 0,
    )


# Liveness: 200 while the process loads, warms or runs its worker; 503 once it failed or stopped
# (a liveness probe restarts it). Readiness: the model is warm and Redis answers.
healthz = probe(_alive, info=_phase)
_REDIS_ANSWERS = redis_answers(
    lambda app: app[SYNTH].redis, Problem("redis_unreachable", "Redis does not answer; check REDIS_URL")
)
readyz = probe(_running, _REDIS_ANSWERS, info=_worker)
