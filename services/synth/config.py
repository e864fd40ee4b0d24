"""Settings of the synth worker, from the environment. The only module that reads ``os.environ``."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from blobstore import StoreConfig
from servicekit import ConfigError, Settings, require_non_negative, require_positive
from servicekit.connect import DEFAULT_URL

Backend = Literal["auto", "onnx", "torch"]
BACKENDS: tuple[Backend, ...] = ("auto", "onnx", "torch")

DEFAULT_VOICE = ""  # unset: af_heart when the model has it, else its first voice


def default_consumer() -> str:
    """``hostname-pid``: unique per process; a pod's stable name makes restarts re-read their own."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class ArchiverConfig:
    delay_s: float = 30.0  # ARCHIVE_DELAY_S: wait after eos so live listeners have it all
    scan_interval_s: float = 3600.0  # ARCHIVE_SCAN_INTERVAL_S: the backstop scan and sweep
    poll_s: float = 5.0  # the longest blocking read of receipts
    retention_days: float = 0.0  # RETENTION_DAYS: 0 keeps everything

    def __post_init__(self) -> None:
        require_positive({"ARCHIVE_SCAN_INTERVAL_S": self.scan_interval_s, "SYNTH_POLL_S": self.poll_s})
        require_non_negative({"ARCHIVE_DELAY_S": self.delay_s, "RETENTION_DAYS": self.retention_days})


@dataclass(frozen=True)
class SynthConfig:
    redis_url: str = DEFAULT_URL
    consumer: str = field(default_factory=default_consumer)
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9100
    log_level: str = "INFO"
    # The model
    backend: Backend = "auto"
    model_dir: str | None = None  # KOKORO_MODEL_DIR: hub layout with config.json, .pth, voices/
    cache_dir: str | None = None  # where converted weights are kept
    voices_dir: str | None = None  # SYNTH_VOICES_DIR: more <id>.bin voice packs (an image's own)
    threads: int | None = None  # inference threads; None: the backend's choice (the cores)
    default_voice: str = DEFAULT_VOICE  # falls back to af_heart, then the first voice, when not available
    bitrate: int = 48_000  # MP3 bits per second
    # The schedule
    concurrency: int = 3  # casts admitted while any of them is close to its listeners
    max_active: int = 6  # hard bound on casts held at once, reached only while all lead
    lead_threshold_s: float = 15.0  # every cast this far ahead: spare capacity, admit more
    poll_s: float = 1.0  # longest blocking read of `jobs`; how often the admitter re-checks
    # a first sentence the model reads within this (its measured RTF) goes whole; a longer one is
    # cut at its first clause or phrase, for first audio sooner; 0: always cut
    first_audio_target_s: float = 0.5
    # Delivery
    lease_s: float = 60.0  # a pending job idle this long is taken over by another worker
    max_attempts: int = 3  # attempts of one job before `error` and `jobs/dead`
    max_crashes_per_chunk: int = 3  # worker deaths with one chunk in hand before `error` (poison input)
    retry_backoff_s: float = 2.0  # wait before attempt n+1: backoff * 2**(n-1)
    retry_backoff_max_s: float = 60.0
    grace_s: float = 30.0  # SIGTERM: finish the chunk in hand and exit within this
    stats_interval_s: float = 5.0  # how often queue depth, lag and Redis memory are polled
    voices_maxlen: int = 100  # entries kept in `synth/voices` (approximate trim)
    # Open (live) casts
    max_live: int = 8  # open casts held at once, apart from the others' concurrency
    live_idle_s: float = 120.0  # an open cast without new text this long is closed by the worker
    live_hold_lead_s: float = 10.0  # while a live sentence is typed, casts this far ahead wait
    # The archive (ARCHIVE_URL unset: audio stays in Redis)
    archive: StoreConfig | None = None
    archiver: ArchiverConfig = field(default_factory=ArchiverConfig)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"SYNTH_BACKEND must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        if self.concurrency < 1 or self.max_active < self.concurrency:
            raise ConfigError("need SYNTH_CONCURRENCY >= 1 and SYNTH_MAX_ACTIVE >= SYNTH_CONCURRENCY")
        require_positive({
            "SYNTH_MAX_ATTEMPTS": self.max_attempts,
            "SYNTH_MAX_CRASHES_PER_CHUNK": self.max_crashes_per_chunk,
            "SYNTH_LEASE_S": self.lease_s,
            "SYNTH_POLL_S": self.poll_s,
            "SYNTH_GRACE_S": self.grace_s,
            "SYNTH_STATS_INTERVAL_S": self.stats_interval_s,
            "SYNTH_MAX_LIVE": self.max_live,
            "SYNTH_LIVE_IDLE_S": self.live_idle_s,
            "SYNTH_LIVE_HOLD_LEAD_S": self.live_hold_lead_s,
        })
        if self.threads is not None:
            require_positive({"SYNTH_THREADS": self.threads})
        require_non_negative({"SYNTH_FIRST_AUDIO_TARGET_S": self.first_audio_target_s})

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
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SynthConfig:
        get = Settings(os.environ if environ is None else environ).get
        d = cls()
        concurrency = get("SYNTH_CONCURRENCY", int, d.concurrency)
        return cls(
            redis_url=get("REDIS_URL", str, d.redis_url),
            consumer=get("SYNTH_CONSUMER", str, d.consumer),
            metrics_host=get("SYNTH_METRICS_HOST", str, d.metrics_host),
            metrics_port=get("SYNTH_METRICS_PORT", int, d.metrics_port),
            log_level=get("SYNTH_LOG_LEVEL", str.upper, get("LOG_LEVEL", str.upper, d.log_level)),
            backend=get("SYNTH_BACKEND", str.lower, d.backend),  # type: ignore[arg-type]  # checked in __post_init__
            model_dir=get("KOKORO_MODEL_DIR", str, None),
            cache_dir=get("SYNTH_CACHE_DIR", str, None),
            voices_dir=get("SYNTH_VOICES_DIR", str, None),
            threads=get("SYNTH_THREADS", int, None),
            default_voice=get("SYNTH_DEFAULT_VOICE", str, d.default_voice),
            bitrate=get("SYNTH_BITRATE", int, d.bitrate),
            concurrency=concurrency,
            # By default twice the cap: room for new casts while the admitted ones are well ahead.
            max_active=get("SYNTH_MAX_ACTIVE", int, 2 * concurrency),
            lead_threshold_s=get("SYNTH_LEAD_THRESHOLD_S", float, d.lead_threshold_s),
            poll_s=get("SYNTH_POLL_S", float, d.poll_s),
            first_audio_target_s=get("SYNTH_FIRST_AUDIO_TARGET_S", float, d.first_audio_target_s),
            lease_s=get("SYNTH_LEASE_S", float, d.lease_s),
            max_attempts=get("SYNTH_MAX_ATTEMPTS", int, d.max_attempts),
            max_crashes_per_chunk=get("SYNTH_MAX_CRASHES_PER_CHUNK", int, d.max_crashes_per_chunk),
            retry_backoff_s=get("SYNTH_RETRY_BACKOFF_S", float, d.retry_backoff_s),
            retry_backoff_max_s=get("SYNTH_RETRY_BACKOFF_MAX_S", float, d.retry_backoff_max_s),
            grace_s=get("SYNTH_GRACE_S", float, d.grace_s),
            stats_interval_s=get("SYNTH_STATS_INTERVAL_S", float, d.stats_interval_s),
            max_live=get("SYNTH_MAX_LIVE", int, d.max_live),
            live_idle_s=get("SYNTH_LIVE_IDLE_S", float, d.live_idle_s),
            live_hold_lead_s=get("SYNTH_LIVE_HOLD_LEAD_S", float, d.live_hold_lead_s),
            archive=StoreConfig.from_settings(get),
            archiver=ArchiverConfig(
                delay_s=get("ARCHIVE_DELAY_S", float, d.archiver.delay_s),
                scan_interval_s=get("ARCHIVE_SCAN_INTERVAL_S", float, d.archiver.scan_interval_s),
                poll_s=get("SYNTH_POLL_S", float, d.archiver.poll_s),
                retention_days=get("RETENTION_DAYS", float, d.archiver.retention_days),
            ),
        )

# The name every service's config.py gives its settings (python -m synth reads them as Config).
Config = SynthConfig
