"""The shape of every service's metrics: a class that defines each metric once on its own
registry (two apps in one process, as in tests or a launcher, never share a counter), renders
it for ``/metrics``, and counts requests by route template and status; and the shared tail's
counters (``TailCounters``)."""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from importlib import metadata
from typing import ClassVar

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

# A source checkout that was never installed has no distribution metadata.
UNKNOWN_VERSION = "unknown"


def project_version() -> str:
    """The installed streamtts distribution's version, for ``streamtts_build_info``."""
    try:
        return metadata.version("streamtts")
    except metadata.PackageNotFoundError:
        return UNKNOWN_VERSION


def new_registry() -> CollectorRegistry:
    """A registry with the process_* (RSS, CPU, open files), platform and GC collectors, which
    the dashboard's service panels read, and the event loop's task count."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    registry.register(LoopTasks())
    return registry


class LoopTasks(Collector):
    """``streamtts_asyncio_tasks``: the tasks not yet done on the event loop that scrapes it (the
    process's one loop). A count that grows with the requests served, not with those in flight,
    is a task that nothing ends (the soak benchmark watches it)."""

    name = "streamtts_asyncio_tasks"
    documentation = "asyncio tasks not yet done on the process's event loop"

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self.name, self.documentation)

    def collect(self) -> Iterator[Metric]:
        try:
            tasks = len(asyncio.all_tasks())
        except RuntimeError:  # scraped off the loop (generate_latest in a thread): nothing to count
            return
        yield GaugeMetricFamily(self.name, self.documentation, value=tasks)


class ServiceMetrics:
    """The base of ``<Service>Metrics``: subclasses name their ``service`` and define their
    metrics on ``self.registry``. Every registry carries ``streamtts_build_info{version, service}``
    = 1, so that a dashboard or an alert can tell which release each target runs."""

    service: ClassVar[str] = ""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = new_registry() if registry is None else registry
        build = Gauge("streamtts_build_info", "Always 1: the release and service of this process",
                      ["version", "service"], registry=self.registry)
        build.labels(version=project_version(), service=self.service).set(1)

    async def view(self, request: web.Request) -> web.Response:
        """``GET /metrics``: the Prometheus text of this registry."""
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


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


class LoopHistogram(Collector):
    """A histogram observed on the event loop's thread alone: no lock (prometheus_client's
    takes one per bucket and sum), a few hundred nanoseconds an observation, for counts made
    once per delivery to thousands of listeners. Scraped like any histogram."""

    def __init__(self, name: str, documentation: str, buckets: Sequence[float], registry: CollectorRegistry) -> None:
        self.name, self.documentation = name, documentation
        self.bounds = tuple(sorted(buckets))
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound (+Inf)
        self.sum = 0.0
        registry.register(self)

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # the first bucket whose bound is >= value
        self.sum += value

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self.name, self.documentation)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation)
        cumulative, buckets = 0, []
        for bound, n in zip((*self.bounds, float("inf")), self.counts):
            cumulative += n
            buckets.append((floatToGoString(bound), float(cumulative)))
        family.add_metric([], buckets, self.sum)
        yield family


class LoopCounter(Collector):
    """A counter incremented on the event loop's thread alone: no lock (see LoopHistogram)."""

    def __init__(self, name: str, documentation: str, registry: CollectorRegistry) -> None:
        # prometheus_client's convention: the family is named without "_total", its sample with it
        self.name, self.documentation = name.removesuffix("_total"), documentation
        self.value = 0
        registry.register(self)

    def inc(self, amount: int = 1) -> None:
        self.value += amount

    def describe(self) -> Iterator[Metric]:
        yield CounterMetricFamily(self.name, self.documentation)

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(self.name, self.documentation, value=float(self.value))


class TailCounters:
    """The shared tail's counters (``fanout.TailMetrics``) under a service's prefix, so that edge and
    intake count their tails alike: ``streamtts_<service>_listeners{kind}`` (``kinds`` present at 0
    from the start), ``..._upstream_reads_total``, ``..._listeners_demoted_total`` and
    ``..._tail_rewinds_total``."""

    def __init__(self, registry: CollectorRegistry, service: str, kinds: Iterable[str]) -> None:
        prefix = f"streamtts_{service}"
        self.listeners = Gauge(f"{prefix}_listeners", "open listeners", ["kind"], registry=registry)
        for kind in kinds:
            self.listeners.labels(kind=kind)  # for dashboards
        self.upstream_reads = Counter(
            f"{prefix}_upstream_reads_total", "blocking XREADs issued by the shared tail", registry=registry,
        )
        self.demoted = Counter(
            f"{prefix}_listeners_demoted_total", "listeners moved back to offset reads (queue full)",
            registry=registry,
        )
        self.rewound = Counter(
            f"{prefix}_tail_rewinds_total",
            "watched casts whose log shrank or was rewritten under the tail's cursor", registry=registry,
        )

    def count_read(self) -> None:
        self.upstream_reads.inc()

    def count_demoted(self, listeners: int) -> None:
        self.demoted.inc(listeners)

    def count_rewind(self) -> None:
        self.rewound.inc()

    def count_listeners(self, kind: str, delta: int) -> None:
        self.listeners.labels(kind=kind).inc(delta)
