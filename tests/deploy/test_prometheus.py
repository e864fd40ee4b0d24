"""The real-Prometheus helper works, and the dashboard's queries answer on documented metrics.

A stand-in exporter serves every metric of docs/metrics.md with the documented type and labels,
so the dashboard's queries can be run by a real Prometheus before the services exist.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.exposition import start_http_server

from streamtts.redisserver import free_port

from .dashboard import dashboard_queries, documented_metrics
from .prometheus_server import PROMETHEUS, Prometheus, running_prometheus

TTFA_P50 = (
    "histogram_quantile(0.5, "
    "sum(rate(streamtts_synth_time_to_first_audio_seconds_bucket[1m])) by (le))"
)
TICK_S = 0.05
# Example values for labels the doc gives none for.
LABEL_VALUES = {"route": ["/api/casts", "/c/{id}"], "status": ["200", "429"], "reason": [""]}
# Observed by the stand-in: 0.3 s lies in the (0.25, 0.5] bucket of the default buckets.
OBSERVED_S = 0.3

pytestmark = pytest.mark.skipif(not Path(PROMETHEUS).is_file(),
                                reason="prometheus is not installed (apt-get install prometheus)")


class StandIn:
    """Every documented metric, in a private registry, moving a little every TICK_S."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self.metrics: list[tuple[str, Any]] = []
        for metric in documented_metrics().values():
            labels = {
                name: values or LABEL_VALUES.get(name, ["x"])
                for name, values in metric.labels.items()
            }
            family: Any
            if metric.type == "counter":
                family = Counter(metric.name.removesuffix("_total"), metric.name,
                                 list(labels), registry=self.registry)
            elif metric.type == "gauge":
                family = Gauge(metric.name, metric.name, list(labels), registry=self.registry)
            else:
                family = Histogram(metric.name, metric.name, list(labels), registry=self.registry)
            children = [family]
            if labels:
                combos: list[dict[str, str]] = [{}]
                for name, values in labels.items():
                    combos = [{**c, name: v} for c in combos for v in values]
                children = [family.labels(**combo) for combo in combos]
            self.metrics.extend((metric.type, child) for child in children)
        self.stop = threading.Event()

    def tick(self) -> None:
        for kind, child in self.metrics:
            if kind == "counter":
                child.inc()
            elif kind == "gauge":
                child.set(3)
            else:
                child.observe(OBSERVED_S)

    def run(self) -> None:
        while not self.stop.wait(TICK_S):
            self.tick()


@pytest.fixture(scope="module")
def stand_in() -> Iterator[str]:
    exporter = StandIn()
    exporter.tick()
    port = free_port()
    server, server_thread = start_http_server(port, addr="127.0.0.1", registry=exporter.registry)
    ticker = threading.Thread(target=exporter.run, daemon=True)
    ticker.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        exporter.stop.set()
        ticker.join(5)
        server.shutdown()
        server.server_close()
        server_thread.join(5)


@pytest.fixture(scope="module")
def prometheus(stand_in: str) -> Iterator[Prometheus]:
    """One Prometheus for the module: its targets are the stand-in and Prometheus itself."""
    port = free_port()
    with running_prometheus({"streamtts": [stand_in], "self": [f"127.0.0.1:{port}"]},
                            port=port) as prom:
        prom.wait_for_targets()
        yield prom


def test_prometheus_scrapes_itself(prometheus: Prometheus) -> None:
    targets = prometheus.targets()
    assert {t["labels"]["job"] for t in targets} == {"prometheus", "self", "streamtts"}
    assert prometheus.wait_for_value('up{job="self"}') == 1
    p50 = prometheus.wait_for_value(
        "histogram_quantile(0.5, sum(rate(prometheus_http_request_duration_seconds_bucket"
        '{job="self", handler="/metrics"}[1m])) by (le))'
    )
    assert 0 < p50 < 10


def test_time_to_first_audio_quantile_from_a_scraped_service(prometheus: Prometheus) -> None:
    assert 0.25 <= prometheus.wait_for_value(TTFA_P50) <= 0.5


def test_every_dashboard_query_answers_with_data(prometheus: Prometheus) -> None:
    prometheus.wait_for_value(TTFA_P50)  # rates need two scrapes
    empty = [f"{q.panel} [{q.ref_id}]: {q.promql}" for q in dashboard_queries()
             if not prometheus.query(q.promql)]
    assert not empty
