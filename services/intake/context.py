"""What an intake app holds, as typed keys (a module of its own so that views and app share them)."""

from __future__ import annotations

import asyncio

from aiohttp import web
from redis.asyncio import Redis

from castlog import CastStore, LiveStore, LogReader, RateLimiter

from .config import Config
from .cooldown import Cooldowns
from .gate import InflightGate
from .metrics import Metrics
from .plan import Planner
from .voices import VoiceBook

CONFIG = web.AppKey("intake.config", Config)
METRICS = web.AppKey("intake.metrics", Metrics)
REDIS = web.AppKey("intake.redis", Redis)
STORE = web.AppKey("intake.store", CastStore)
# The cast logs as readers follow them (live sessions), archived ones read from the archive.
LOG = web.AppKey("intake.log", LogReader)
LIVE = web.AppKey("intake.live", LiveStore)
LIMITER = web.AppKey("intake.limiter", RateLimiter)
COOLDOWNS = web.AppKey("intake.cooldowns", Cooldowns)
# The public origin's OpenAPI document as served: JSON, built once with this config's limits.
OPENAPI = web.AppKey("intake.openapi", bytes)
VOICES = web.AppKey("intake.voices", VoiceBook)
GATE = web.AppKey("intake.gate", InflightGate)
PLANNER = web.AppKey("intake.planner", Planner)
# `/v1/audio/speech`: the pool of the streams' blocking reads, and the bound on open streams.
FOLLOWER = web.AppKey("intake.follower", Redis)
SPEECH_LOG = web.AppKey("intake.speech_log", LogReader)  # LOG over FOLLOWER
SPEECH_SLOTS = web.AppKey("intake.speech_slots", asyncio.Semaphore)
SPEECH_STREAMS: web.AppKey[set[asyncio.Task[object]]] = web.AppKey("intake.speech_streams")
