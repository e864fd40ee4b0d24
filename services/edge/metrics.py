"""Every metric edge exports, defined once; names fixed in docs/metrics.md (edge section).

servicekit's shape: a class per app on its own registry, so that several apps in one process
(tests, benchmarks) do not share counters.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from servicekit import RequestCounter, ServiceMetrics
from servicekit.metrics import LoopCounter, LoopHistogram, TailCounters

# Append -> written: from a few ms at the tail to seconds for a slow proxy.
DELIVERY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LISTENER_KINDS = ("sse", "mp3", "poll")


class EdgeMetrics(ServiceMetrics):
    service = "edge"

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        r = self.registry
        self.requests = RequestCounter("streamtts_edge_requests_total", r)
        self.tail = TailCounters(r, self.service, LISTENER_KINDS)  # the shared tail's (fanout.TailMetrics)
        # observed once per record and listener, on the loop: the lock-free kind
        self.delivery = LoopHistogram(
            "streamtts_edge_delivery_seconds", "record append (entry field ts) -> written to a listener",
            DELIVERY_BUCKETS, r,
        )
        self.delivered = LoopCounter("streamtts_edge_records_delivered_total", "records written to listeners", r)
        self.rate_limited = Counter(
            "streamtts_edge_rate_limited_total", "requests answered 429", registry=r,
        )
