"""What a synth app holds, as typed keys (a module of its own so that views and app share them)."""

from __future__ import annotations

import asyncio

from aiohttp import web
from redis.asyncio import Redis

from .config import SynthConfig
from .metrics import SynthMetrics
from .service import Loader, SynthService

CONFIG = web.AppKey("synth.config", SynthConfig)
LOADER: web.AppKey[Loader] = web.AppKey("synth.loader")
METRICS = web.AppKey("synth.metrics", SynthMetrics)
REDIS = web.AppKey("synth.redis", Redis)
SERVICE = web.AppKey("synth.service", SynthService)
# The service's run(): the process stops when it ends (servicekit.run's `until`).
SERVICE_TASK: web.AppKey[asyncio.Task[None]] = web.AppKey("synth.service_task")
