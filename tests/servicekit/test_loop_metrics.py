"""servicekit's lock-free metrics for counts made on the event loop: scraped like prometheus_client's own."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from servicekit.metrics import LoopCounter, LoopHistogram, new_registry


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


def test_a_loop_counter_scrapes_with_its_total_suffix() -> None:
    registry = CollectorRegistry()
    counter = LoopCounter("t_records_total", "r", registry)
    counter.inc(3)
    counter.inc()
    assert samples(registry)[("t_records_total", "")] == 4


async def test_the_asyncio_tasks_gauge_follows_the_tasks_in_flight() -> None:
    registry = new_registry()
    idle = samples(registry)[("streamtts_asyncio_tasks", "")]
    gate = asyncio.Event()
    held = [asyncio.ensure_future(gate.wait()) for _ in range(5)]
    assert samples(registry)[("streamtts_asyncio_tasks", "")] == idle + 5
    gate.set()
    await asyncio.gather(*held)
    assert samples(registry)[("streamtts_asyncio_tasks", "")] == idle  # back when they end


def test_the_asyncio_tasks_gauge_is_left_out_off_the_loop() -> None:
    assert ("streamtts_asyncio_tasks", "") not in samples(new_registry())
