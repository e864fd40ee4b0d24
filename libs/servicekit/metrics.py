"""The shape of every service's metrics: a class that defines each metric once on its own
registry (two apps in one process, as in tests or a launcher, never share a counter), renders
it for ``/metrics``, and counts requests by route template and status."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST


def new_registry() -> CollectorRegistry:
    """A registry with the process_* (RSS, CPU, open files), platform and GC collectors, which
    the dashboard's service panels read."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class ServiceMetrics:
    """The base of ``<Service>Metrics``: subclasses define their metrics on ``self.registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = new_registry() if registry is None else registry

    def render(self) -> bytes:
        return generate_latest(self.registry)

    async def view(self, request: web.Request) -> web.Response:
        """``GET /metrics``: the Prometheus text of this registry."""
        return web.Response(body=self.render(), headers={"Content-Type": CONTENT_TYPE})


class RequestCounter:
    """``<name>{route, status}``: HTTP requests by route template and status code."""

    def __init__(self, name: str, registry: CollectorRegistry) -> None:
        self.counter = Counter(name, "HTTP requests by route template and status code", ["route", "status"],
                               registry=registry)
        # Each request's series, looked up once: labels() costs microseconds (a lock, label checks).
        # Routes are the app's templates (or one "unmatched") and statuses few, so this stays small.
        self._series: dict[tuple[str, int], Counter] = {}

    def __call__(self, route: str, status: int) -> None:
        series = self._series.get((route, status))
        if series is None:
            series = self._series[route, status] = self.counter.labels(route, str(status))
        series.inc()
