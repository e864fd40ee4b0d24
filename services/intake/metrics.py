"""Intake's Prometheus metrics, each defined once; names fixed in docs/metrics.md."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from servicekit import RequestCounter, ServiceMetrics
from servicekit.metrics import TailCounters

# A submit is validation plus one script call: sub-millisecond to a few ms; past 1 s is trouble.
SUBMIT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
RESULTS = ("new", "existing", "reenqueued")
# Who follows casts through the shared tail: /v1/audio/speech streams, live WebSockets.
LISTENER_KINDS = ("speech", "live")


class Metrics(ServiceMetrics):
    """One per app, on its own registry, so two apps in one process (tests, a launcher) never clash."""

    service = "intake"

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        registry = self.registry
        self.requests = RequestCounter("streamtts_intake_requests_total", registry)
        self.submit_seconds = Histogram(
            "streamtts_intake_submit_seconds",
            "Latency of one submit (validation + the submit script)",
            buckets=SUBMIT_BUCKETS,
            registry=registry,
        )
        self.submits = Counter(
            "streamtts_intake_submits_total",
            "Submit outcomes: new, existing, reenqueued, or refused with the error code as reason",
            ["result", "reason"],
            registry=registry,
        )
        self.rate_limited = Counter(
            "streamtts_intake_rate_limited_total", "Requests answered 429", registry=registry
        )
        # the shared tail's (fanout.TailMetrics): /v1/audio/speech streams and live sessions
        self.tail = TailCounters(registry, "intake", LISTENER_KINDS)
        self.auth_failures = Counter(
            "streamtts_intake_auth_failures_total",
            "Refused credentials by kind: api_key, write_token, admin_token",
            ["credential"],
            registry=registry,
        )
        for credential in ("api_key", "write_token", "admin_token"):
            self.auth_failures.labels(credential)
        # Zero-valued series from the start, so that rate() over them works before the first hit.
        self._results = {result: self.submits.labels(result, "") for result in RESULTS}

    def submitted(self, result: str, seconds: float) -> None:
        self._results[result].inc()
        self.submit_seconds.observe(seconds)

    def refused(self, code: str) -> None:
        self.submits.labels("refused", code).inc()
        if code == "rate_limited":
            self.rate_limited.inc()
