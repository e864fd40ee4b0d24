"""servicekit's lock-free metrics for counts made on the event loop: scraped like prometheus_client's own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from servicekit.metrics import LoopCounter, LoopHistogram


def samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    text = generate_latest(registry).decode()
    return {(s.name, s.labels.get("le", "")): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_a_loop_histogram_scrapes_as_a_cumulative_histogram() -> None:
    registry = CollectorRegistry()
    hist = LoopHistogram("t_delivery_seconds", "d", (0.01, 0.1, 1.0), registry)
    for value in (0.005, 0.01, 0.05, 0.5, 7.0):
        hist.observe(value)
    got = samples(registry)
    assert got[("t_delivery_seconds_bucket", "0.01")] == 2  # a value on a bound counts in its bucket (le)
    assert got[("t_delivery_seconds_bucket", "0.1")] == 3
    assert got[("t_delivery_seconds_bucket", "1.0")] == 4
    assert got[("t_delivery_seconds_bucket", "+Inf")] == 5 == got[("t_delivery_seconds_count", "")]
    assert abs(got[("t_delivery_seconds_sum", "")] - 7.565) < 1e-9
    assert hist.count == 5


def test_a_loop_counter_scrapes_with_its_total_suffix() -> None:
    registry = CollectorRegistry()
    counter = LoopCounter("t_records_total", "r", registry)
    counter.inc(3)
    counter.inc()
    assert samples(registry)[("t_records_total", "")] == 4
