"""Every synth metric, defined once. Names and meanings are fixed in docs/metrics.md."""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

# Synth's own registry, so that a process hosting other services too still serves exactly
# this service's metrics on the synth port.
REGISTRY = CollectorRegistry(auto_describe=True)
for _collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
    REGISTRY.register(_collector)

_SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0)
_RATIOS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.5, 2.0, 4.0)
_LEADS = (-30.0, -10.0, -5.0, -2.0, -1.0, 0.0, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0)

TIME_TO_FIRST_AUDIO = Histogram(
    "streamtts_synth_time_to_first_audio_seconds",
    "Job enqueued_at to the cast's first audio record durable",
    buckets=_SECONDS,
    registry=REGISTRY,
)
CHUNK_SECONDS = Histogram(
    "streamtts_synth_chunk_seconds",
    "Per-chunk inference (stage=synth) and MP3 encode (stage=encode) time",
    ["stage"],
    buckets=_SECONDS,
    registry=REGISTRY,
)
RTF = Histogram(
    "streamtts_synth_rtf",
    "Real-time factor per chunk: synthesis seconds / audio seconds",
    buckets=_RATIOS,
    registry=REGISTRY,
)
SYNTH_SECONDS = Counter(
    "streamtts_synth_inference_seconds", "Inference time, summed over chunks (RTF = this / audio seconds)", registry=REGISTRY
)
AUDIO_SECONDS = Counter(
    "streamtts_synth_audio_seconds", "Audio synthesized, in seconds, summed over chunks", registry=REGISTRY
)


def observe_synthesis(took_s: float, audio_s: float) -> None:
    """One chunk's inference time and audio length: their rates' ratio is the true mean RTF,
    where the histogram's mean would weigh a short first chunk as much as a long one."""
    SYNTH_SECONDS.inc(took_s)
    AUDIO_SECONDS.inc(audio_s)


ACTIVE_CASTS = Gauge("streamtts_synth_active_casts", "Casts being synthesized now", registry=REGISTRY)
LEAD_SECONDS = Histogram(
    "streamtts_synth_lead_seconds",
    "Lead of the scheduled cast when it was picked (casts without audio yet are not observed)",
    buckets=_LEADS,
    registry=REGISTRY,
)
UNDERRUNS = Counter(
    "streamtts_synth_underruns",
    "Chunks appended while the cast's lead was below zero",
    registry=REGISTRY,
)
QUEUE_DEPTH = Gauge(
    "streamtts_synth_queue_depth", "Entries in jobs not yet delivered to the group", registry=REGISTRY
)
CONSUMER_LAG = Gauge(
    "streamtts_synth_consumer_lag", "The group's lag plus its pending entries", registry=REGISTRY
)
ATTEMPTS = Counter("streamtts_synth_attempts", "Attempts started (start records)", registry=REGISTRY)
RETRIES = Counter(
    "streamtts_synth_retries", "Attempts that failed and will be retried", registry=REGISTRY
)
DEAD_LETTERS = Counter("streamtts_synth_dead_letters", "Jobs moved to jobs/dead", registry=REGISTRY)
MODEL_LOAD_SECONDS = Gauge("streamtts_synth_model_load_seconds", "Model load time", registry=REGISTRY)
WARMUP_SECONDS = Gauge("streamtts_synth_warmup_seconds", "Warm-up time", registry=REGISTRY)
REDIS_USED_MEMORY = Gauge(
    "streamtts_redis_used_memory_bytes", "Redis used_memory, polled by synth", registry=REGISTRY
)

for _stage in ("synth", "encode"):
    CHUNK_SECONDS.labels(stage=_stage)  # both series exist from the start, at zero


def exposition() -> tuple[bytes, str]:
    """The Prometheus text of this registry and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST

# The archive (synth's archiver; see docs/design.md, "The archive")
ARCHIVED = Counter("streamtts_archive_casts_archived", "Casts moved from Redis into the archive", registry=REGISTRY)
ARCHIVE_BYTES = Counter("streamtts_archive_written_bytes", "Bytes written to the archive", registry=REGISTRY)
ARCHIVED_CASTS = Gauge("streamtts_archive_casts", "Archived casts, as of the last scan", registry=REGISTRY)
ARCHIVE_SIZE = Gauge("streamtts_archive_size_bytes", "Bytes held by the archive, as of the last scan", registry=REGISTRY)
REDIS_CASTS = Gauge(
    "streamtts_redis_casts", "Casts whose audio Redis still holds (live or not yet archived), as of the last scan",
    registry=REGISTRY,
)
REDIS_BYTES_PER_CAST = Gauge(
    "streamtts_redis_bytes_per_live_cast", "Redis used_memory divided by the casts it holds audio of, as of the last scan",
    registry=REGISTRY,
)
SWEEPS = Counter("streamtts_archive_sweeps", "Scans of every cast (backstop archiving and retention)", registry=REGISTRY)
SWEPT = Counter("streamtts_archive_swept_casts", "Casts deleted by retention (RETENTION_DAYS)", registry=REGISTRY)
