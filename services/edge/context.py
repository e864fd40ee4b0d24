"""What every handler needs, in one typed object under one app key (set up in ``app.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web
from redis.asyncio import Redis

from castlog import CastStore

from .config import Config
from .layout import LayoutCache
from .limits import Guard
from .metrics import EdgeMetrics
from .tail import Tail


@dataclass
class Edge:
    cfg: Config
    metrics: EdgeMetrics
    reader: Redis  # the shared pool: every non-blocking read
    store: CastStore
    tail: Tail
    guard: Guard
    layouts: LayoutCache


EDGE = web.AppKey("edge", Edge)
CONFIG = web.AppKey("config", Config)
METRICS = web.AppKey("metrics", EdgeMetrics)
# The public origin's OpenAPI document as served: JSON, built once with this config's limits.
OPENAPI = web.AppKey("openapi", bytes)
