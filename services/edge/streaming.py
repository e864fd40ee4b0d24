"""What the long responses (SSE, the MP3 stream) share once their headers are out: a write
that a client cannot stall forever, the count of what was written, and one way to end."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web
from redis.exceptions import RedisError

from castlog import ArchiveUnavailable, StaleLayout
from fanout import Item

from .metrics import EdgeMetrics

log = logging.getLogger(__name__)

# Below this and with nothing queued, a write cannot wait on a slow client (asyncio's default
# high-water mark), so it skips the timeout machinery: the common case stays cheap.
WRITE_FAST_BYTES = 64 * 1024


async def write_within(request: web.Request, resp: web.StreamResponse, data: bytes, timeout_s: float) -> None:
    """Write ``data``; a client that does not drain within ``timeout_s`` gets its stream closed
    (it resumes from the last id it received) so that it cannot pin memory or a seat forever."""
    transport = request.transport
    if transport is None or transport.is_closing():
        raise ConnectionResetError("client went away")
    if transport.get_write_buffer_size() == 0 and len(data) <= WRITE_FAST_BYTES:
        await resp.write(data)
        return
    try:
        await asyncio.wait_for(resp.write(data), timeout_s)
    except asyncio.TimeoutError:
        transport.abort()  # drop what it did not take: waiting for it to drain could take forever
        raise


class DirectSse:
    """A chunked SSE response as a listener's sink (``fanout.listener.Sink``): the tail's
    hand-offs of one read are written straight to the transport in one write, each frame and its
    chunk framing built once per record for every listener. Not ready while the client has not
    taken what it was sent: then records go the handler's way, with its write timeout."""

    def __init__(self, transport: asyncio.Transport, metrics: EdgeMetrics) -> None:
        self.transport, self.metrics = transport, metrics

    @classmethod
    def of(cls, request: web.Request, resp: web.StreamResponse, metrics: EdgeMetrics) -> DirectSse | None:
        transport = request.transport
        if not isinstance(transport, asyncio.Transport) or resp.headers.get("Transfer-Encoding") != "chunked":
            return None
        return cls(transport, metrics)

    def ready(self) -> bool:
        return not self.transport.is_closing() and not self.transport.get_write_buffer_size()

    def write(self, items: list[Item]) -> None:
        transport = self.transport
        if transport.is_closing():
            return  # the client left: its handler ends
        transport.write(items[0].sse_chunk() if len(items) == 1 else b"".join(i.sse_chunk() for i in items))
        observe(self.metrics, items)


def observe(metrics: EdgeMetrics, items: list[Item]) -> None:
    """Count written records; latency only for those from the tail (a replay of old records is
    not late). Once per record and listener: kept to a few operations."""
    metrics.delivered.inc(len(items))
    now_ms = time.time() * 1000
    delivery = metrics.delivery
    for item in items:
        if item.from_tail and item.entry.ts > 0:
            delivery.observe(max(0.0, now_ms - item.entry.ts) / 1000)


@contextmanager
def cut_short(what: str, cast_id: str) -> Iterator[None]:
    """Around a response whose headers are sent: a 500 can no longer follow, so a failure ends
    the body early (logged), and the client resumes (SSE from its last id, audio by range)."""
    try:
        yield
    except (ConnectionResetError, asyncio.TimeoutError):
        pass  # the client left or stopped reading (a player seeking cancels ranges all the time)
    except (RedisError, ArchiveUnavailable, StaleLayout) as exc:
        log.warning("%s of %s cut short: %s", what, cast_id, exc)
    except Exception:  # noqa: BLE001 - headers are sent: a 500 can't follow; cut it short
        log.exception("%s of %s failed", what, cast_id)
