"""What every handler needs, in one typed object under one app key (set up in ``app.py``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import NamedTuple

from aiohttp import web
from redis.asyncio import Redis

from castlog import Layout, LogReader
from durablestreams import DurableStreams
from fanout import Tail

from .config import Config
from .errors import not_found
from .guards import Guard
from .layout import LayoutCache
from .metrics import EdgeMetrics
from .played import Played


@dataclass
class Edge:
    cfg: Config
    metrics: EdgeMetrics
    redis: Redis  # the shared pool: every non-blocking command
    tail: Tail
    guard: Guard
    layouts: LayoutCache
    reader: LogReader  # every read of a cast log, archived logs included
    played: Played  # casts read lately, for retention
    durable: DurableStreams  # /v1/stream's reads (its waiters wait on ``tail``)
    ds_waiters: asyncio.Semaphore  # EDGE_DS_MAX_WAITERS: the /v1/stream readers waiting at once


EDGE = web.AppKey("edge", Edge)
CONFIG = web.AppKey("config", Config)
METRICS = web.AppKey("metrics", EdgeMetrics)


class Known(NamedTuple):
    """A cast that a request names and may read: its layout, and the client that spent its read token."""

    edge: Edge
    client: str
    layout: Layout


async def known_cast(request: web.Request, cast_id: str) -> Known:
    """The cast a request names (parsed), after its rate-limit token: 404 unless its log has records."""
    edge = request.app[EDGE]
    client = await edge.guard.take_read(request)
    layout = await edge.layouts.get(cast_id)
    if layout.tail == 0:
        raise not_found("no such cast")
    edge.played.mark(cast_id)
    return Known(edge, client, layout)
