"""What every handler needs, in one typed object under one app key (set up in ``app.py``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiohttp import web
from redis.asyncio import Redis

from .config import SynthConfig
from .metrics import SynthMetrics
from .service import SynthService


@dataclass
class Synth:
    cfg: SynthConfig
    metrics: SynthMetrics
    redis: Redis
    service: SynthService  # the model and the worker; its phase answers the probes
    task: asyncio.Task[None]  # the service's run(): the process stops when it ends (Serving's `until`)


SYNTH = web.AppKey("synth", Synth)
CONFIG = web.AppKey("config", SynthConfig)
METRICS = web.AppKey("metrics", SynthMetrics)
