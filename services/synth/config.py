"""Settings of the synth worker, from the environment. The only module that reads ``os.environ``."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Backend = Literal["auto", "onnx", "torch"]
BACKENDS: tuple[Backend, ...] = ("auto", "onnx", "torch")

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_VOICE = "af_heart"


def default_consumer() -> str:
    """``hostname-pid``: unique per process; a pod's stable name makes restarts re-read their own."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class SynthConfig:
    redis_url: str = DEFAULT_REDIS_URL
    consumer: str = field(default_factory=default_consumer)
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9100
    log_level: str = "INFO"
    # The model
    backend: Backend = "auto"
    model_dir: str | None = None  # KOKORO_MODEL_DIR: hub layout with config.json, .pth, voices/
    cache_dir: str | None = None  # where converted weights are kept
    threads: int | None = None  # inference threads; None: the backend's choice (the cores)
    default_voice: str = DEFAULT_VOICE  # falls back to the first voice when not available
    bitrate: int = 48_000  # MP3 bits per second
    # The schedule
    concurrency: int = 3  # casts admitted while any of them is close to its listeners
    max_active: int = 6  # hard bound on casts held at once, reached only while all lead
    lead_threshold_s: float = 15.0  # every cast this far ahead: spare capacity, admit more
    poll_s: float = 1.0  # longest blocking read of `jobs`; how often the admitter re-checks
    # Delivery
    lease_s: float = 60.0  # a pending job idle this long is taken over by another worker
    max_attempts: int = 3  # attempts of one job before `error` and `jobs/dead`
    retry_backoff_s: float = 2.0  # wait before attempt n+1: backoff * 2**(n-1)
    retry_backoff_max_s: float = 60.0
    grace_s: float = 30.0  # SIGTERM: finish the chunk in hand and exit within this
    stats_interval_s: float = 5.0  # how often queue depth, lag and Redis memory are polled
    voices_maxlen: int = 100  # entries kept in `synth/voices` (approximate trim)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"SYNTH_BACKEND must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        if self.concurrency < 1 or self.max_active < self.concurrency:
            raise ValueError("need SYNTH_CONCURRENCY >= 1 and SYNTH_MAX_ACTIVE >= SYNTH_CONCURRENCY")
        if self.max_attempts < 1:
            raise ValueError("SYNTH_MAX_ATTEMPTS must be at least 1")
        if min(self.lease_s, self.poll_s, self.grace_s, self.stats_interval_s) <= 0:
            raise ValueError("SYNTH_LEASE_S, SYNTH_POLL_S, SYNTH_GRACE_S and the stats interval must be > 0")
        if self.threads is not None and self.threads < 1:
            raise ValueError("SYNTH_THREADS must be at least 1")

    @property
    def lease_ms(self) -> int:
        return int(self.lease_s * 1000)

    @property
    def refresh_s(self) -> float:
        """Leases are refreshed three times per lease, so one missed refresh never loses a job."""
        return self.lease_s / 3

    def backoff_s(self, attempt: int) -> float:
        """How long to wait before retrying after failed attempt ``attempt`` (1-based)."""
        return float(min(self.retry_backoff_max_s, self.retry_backoff_s * 2 ** max(0, attempt - 1)))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SynthConfig:
        e = os.environ if env is None else env

        def opt(name: str) -> str | None:
            value = e.get(name, "").strip()
            return value or None

        def num(name: str, default: float) -> float:
            value = opt(name)
            try:
                return float(value) if value is not None else default
            except ValueError:
                raise ValueError(f"{name} must be a number, not {value!r}") from None

        threads = opt("SYNTH_THREADS")
        d = cls()
        concurrency = int(num("SYNTH_CONCURRENCY", d.concurrency))
        return cls(
            redis_url=opt("REDIS_URL") or d.redis_url,
            consumer=opt("SYNTH_CONSUMER") or d.consumer,
            metrics_host=opt("SYNTH_METRICS_HOST") or d.metrics_host,
            metrics_port=int(num("SYNTH_METRICS_PORT", d.metrics_port)),
            log_level=(opt("SYNTH_LOG_LEVEL") or opt("LOG_LEVEL") or d.log_level).upper(),
            backend=(opt("SYNTH_BACKEND") or d.backend).lower(),  # type: ignore[arg-type]
            model_dir=opt("KOKORO_MODEL_DIR"),
            cache_dir=opt("SYNTH_CACHE_DIR"),
            threads=int(threads) if threads else None,
            default_voice=opt("SYNTH_DEFAULT_VOICE") or d.default_voice,
            bitrate=int(num("SYNTH_BITRATE", d.bitrate)),
            concurrency=concurrency,
            # By default twice the cap: room for new casts while the admitted ones are well ahead.
            max_active=int(num("SYNTH_MAX_ACTIVE", 2 * concurrency)),
            lead_threshold_s=num("SYNTH_LEAD_THRESHOLD_S", d.lead_threshold_s),
            poll_s=num("SYNTH_POLL_S", d.poll_s),
            lease_s=num("SYNTH_LEASE_S", d.lease_s),
            max_attempts=int(num("SYNTH_MAX_ATTEMPTS", d.max_attempts)),
            retry_backoff_s=num("SYNTH_RETRY_BACKOFF_S", d.retry_backoff_s),
            retry_backoff_max_s=num("SYNTH_RETRY_BACKOFF_MAX_S", d.retry_backoff_max_s),
            grace_s=num("SYNTH_GRACE_S", d.grace_s),
            stats_interval_s=num("SYNTH_STATS_INTERVAL_S", d.stats_interval_s),
        )
