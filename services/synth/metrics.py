"""Every synth metric, defined once. Names and meanings are fixed in docs/metrics.md.

servicekit's shape, as intake's and edge's: a class on its own registry, so that a process
hosting other services too still serves exactly this service's metrics on the synth port. The
app makes one (``app[METRICS]``) and hands it to the service, its worker and the archiver.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from servicekit import ServiceMetrics

_SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0)
_RATIOS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.5, 2.0, 4.0)
_LEADS = (-30.0, -10.0, -5.0, -2.0, -1.0, 0.0, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0)
STAGES = ("synth", "encode")


class RatioHistogram:
    """One histogram observed under its name and under a deprecated one (same buckets)."""

    def __init__(self, current: Histogram, deprecated: Histogram) -> None:
        self.current = current
        self.deprecated = deprecated

    def observe(self, value: float) -> None:
        self.current.observe(value)
        self.deprecated.observe(value)


class SynthMetrics(ServiceMetrics):
    service = "synth"

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        r = self.registry
        self.time_to_first_audio = Histogram(
            "streamtts_synth_time_to_first_audio_seconds", "Job enqueued_at to the cast's first audio record durable",
            buckets=_SECONDS, registry=r,
        )
        self.chunk_seconds = Histogram(
            "streamtts_synth_chunk_seconds", "Per-chunk inference (stage=synth) and MP3 encode (stage=encode) time",
            ["stage"], buckets=_SECONDS, registry=r,
        )
        for stage in STAGES:
            self.chunk_seconds.labels(stage=stage)  # both series exist from the start, at zero
        self.rtf = RatioHistogram(
            Histogram("streamtts_synth_rtf_ratio", "Real-time factor per chunk: synthesis seconds / audio seconds",
                      buckets=_RATIOS, registry=r),
            # the name before the unit suffix, kept for one release (docs/metrics.md: deprecated)
            Histogram("streamtts_synth_rtf", "Deprecated: streamtts_synth_rtf_ratio; removed in the next release",
                      buckets=_RATIOS, registry=r),
        )
        self.synth_seconds = Counter(
            "streamtts_synth_inference_seconds", "Inference time, summed over chunks (RTF = this / audio seconds)",
            registry=r,
        )
        self.audio_seconds = Counter(
            "streamtts_synth_audio_seconds", "Audio synthesized, in seconds, summed over chunks", registry=r,
        )
        self.cache_hits = Counter(
            "streamtts_synth_chunk_cache_hits", "Chunks read from the chunk cache instead of the model", registry=r,
        )
        self.cache_misses = Counter(
            "streamtts_synth_chunk_cache_misses", "Chunk cache lookups that found nothing (the model read the chunk)",
            registry=r,
        )
        self.cache_bytes = Gauge(
            "streamtts_synth_chunk_cache_bytes", "Bytes the chunk cache holds, as of this worker's last keep",
            registry=r,
        )
        self.cache_saved_seconds = Counter(
            "streamtts_synth_chunk_cache_saved_seconds", "Model seconds the chunk cache's hits saved", registry=r,
        )
        self.active_casts = Gauge("streamtts_synth_active_casts", "Casts being synthesized now", registry=r)
        self.capacity = Gauge(
            "streamtts_synth_capacity_ratio", "Audio seconds the model makes per second (1 / its measured RTF)",
            registry=r,
        )
        self.demand = Gauge(
            "streamtts_synth_demand_ratio", "Audio seconds per second the admitted casts need so that no listener "
            "stalls", registry=r,
        )
        self.lead_seconds = Histogram(
            "streamtts_synth_lead_seconds",
            "Lead of the scheduled cast when it was picked (casts without audio yet are not observed)",
            buckets=_LEADS, registry=r,
        )
        self.underruns = Counter(
            "streamtts_synth_underruns", "Chunks appended while the cast's lead was below zero", registry=r,
        )
        self.queue_depth = Gauge(
            "streamtts_synth_queue_depth", "Entries in jobs not yet delivered to the group", registry=r,
        )
        self.consumer_lag = Gauge("streamtts_synth_consumer_lag", "The group's lag plus its pending entries", registry=r)
        self.attempts = Counter("streamtts_synth_attempts", "Attempts started (start records)", registry=r)
        self.retries = Counter("streamtts_synth_retries", "Attempts that failed and will be retried", registry=r)
        self.dead_letters = Counter("streamtts_synth_dead_letters", "Jobs moved to jobs/dead", registry=r)
        self.model_load_seconds = Gauge("streamtts_synth_model_load_seconds", "Model load time", registry=r)
        self.warmup_seconds = Gauge("streamtts_synth_warmup_seconds", "Warm-up time", registry=r)
        # 0 until this worker has published its voice list: intake accepts nothing before one has.
        self.voices_published = Gauge(
            "streamtts_synth_voices_published", "Voices this worker has published to synth/voices (0: not yet)",
            registry=r,
        )
        self.redis_used_memory = Gauge(
            "streamtts_redis_used_memory_bytes", "Redis used_memory, polled by synth", registry=r,
        )
        self.redis_maxmemory = Gauge(
            "streamtts_redis_maxmemory_bytes", "Redis maxmemory (0: no cap), polled by synth", registry=r,
        )
        # The archive (synth's archiver; see docs/design.md, "The archive")
        self.archived = Counter(
            "streamtts_archive_casts_archived", "Casts moved from Redis into the archive", registry=r,
        )
        self.archive_bytes = Counter("streamtts_archive_written_bytes", "Bytes written to the archive", registry=r)
        self.archived_casts = Gauge("streamtts_archive_casts", "Archived casts, as of the last scan", registry=r)
        self.archive_size = Gauge(
            "streamtts_archive_size_bytes", "Bytes held by the archive, as of the last scan", registry=r,
        )
        self.redis_casts = Gauge(
            "streamtts_redis_casts",
            "Casts whose audio Redis still holds (live or not yet archived), as of the last scan", registry=r,
        )
        self.redis_bytes_per_cast = Gauge(
            "streamtts_redis_bytes_per_live_cast",
            "Redis used_memory divided by the casts it holds audio of, as of the last scan", registry=r,
        )
        self.sweeps = Counter(
            "streamtts_archive_sweeps", "Scans of every cast (backstop archiving and retention)", registry=r,
        )
        self.archive_errors = Counter(
            "streamtts_archive_errors", "Archiver rounds that failed (Redis, the store) and are retried", registry=r,
        )
        self.swept = Counter("streamtts_archive_swept_casts", "Casts deleted by retention (RETENTION_DAYS)", registry=r)
