"""``TailCounters``: the shared tail's metrics (castlog's ``TailMetrics``) under a service's
prefix, so edge and intake count their tails alike: ``streamtts_<service>_listeners{kind}``,
``..._upstream_reads_total``, ``..._listeners_demoted_total`` and ``..._tail_rewinds_total``."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge


class TailCounters:
    """Implements ``fanout.TailMetrics`` on ``registry``; ``kinds`` are present at 0 from the start."""

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
