"""Settings of the synth worker, from the environment. The only module that reads ``os.environ``.

Each field declares its variable, default and bounds on one line (``servicekit.settings``); the
README's settings table is generated from these lines (``scripts/settings_doc.py``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from blobstore import StoreConfig
from servicekit.settings import ADMIN_TOKEN, CONTENT_KEY, REDIS_URL, Settings, setting

Backend = Literal["auto", "onnx", "torch"]
# LAME's quality scale (``-q``) runs from 0 (best, slowest) to this.
MAX_LAME_QUALITY = 9


def default_consumer() -> str:
    """``hostname-pid``: unique per process; a pod's stable name makes restarts re-read their own."""
    return f"{socket.gethostname()}-{os.getpid()}"


# New jobs a worker reads ahead to admit clients in turn: fairness reaches this deep into the
# queue (two clients' allowed bursts are 60), and a worker holds at most this many waiting jobs
# that other workers cannot take until it stops or dies.
FAIR_WINDOW = 256


@dataclass(frozen=True)
class ArchiverConfig(Settings):
    delay_s: float = setting("ARCHIVE_DELAY_S", 30.0, ge=0, doc="a finished cast is archived this long after "
                             "its `eos` (its listeners have it all by then)")
    scan_interval_s: float = setting("ARCHIVE_SCAN_INTERVAL_S", 3600.0, gt=0, doc="how often every cast is "
                                     "checked: archives what receipts missed, runs retention, measures the archive")
    retention_days: float = setting("RETENTION_DAYS", 0.0, ge=0, shown="`0` (off)",
                                    doc="finished casts not read for this long are deleted by the scan")


@dataclass(frozen=True)
class SynthConfig(Settings):
    # #34: one admission, within the measured capacity; the even sharing and its two settings went.
    removed: ClassVar[Mapping[str, str]] = {
        "SYNTH_ADMISSION": "whole-text casts are always admitted within the model's measured capacity "
                           "(the `even` sharing is gone)",
        "SYNTH_CONCURRENCY": "whole-text casts are admitted within the model's measured capacity, at most "
                             "SYNTH_MAX_ACTIVE of them (it was twice SYNTH_CONCURRENCY; now 6 unless set)",
        "SYNTH_LEAD_THRESHOLD_S": "whole-text casts are admitted within the model's measured capacity "
                                  "(SYNTH_ADMIT_HEADROOM sets its margin)",
        # #37: the first chunk is always a phrase, and later ones follow the measured speed.
        "SYNTH_FIRST_AUDIO_TARGET_S": "the first chunk is always a phrase or clause, and each later one is "
                                      "sized by the model's measured speed",
    }
    redis_url: str = REDIS_URL.field()
    admin_token: str | None = ADMIN_TOKEN.field()  # intake's: a delete request is carried out only with its proof
    content_key: str = CONTENT_KEY.field()  # intake's: an idle open cast closed here is named as intake names it
    # A pod's stable name makes a restarted worker re-read its own pending jobs.
    consumer: str = setting("SYNTH_CONSUMER", factory=default_consumer, shown="`hostname-pid`",
                            doc="the consumer name in group `synth` (a stable name re-reads its own pending jobs "
                                "after a restart)")
    wait_replicas: int = setting("SYNTH_WAIT_REPLICAS", 0, ge=0, doc="a job moved from its lane into `jobs` "
                                 "is dropped from the lane only once this many Redis replicas have it (WAIT); 0: "
                                 "no wait (a single Redis)")
    wait_timeout_ms: int = setting("SYNTH_WAIT_TIMEOUT_MS", 1000, gt=0, doc="how long that WAIT may take (the lane "
                                   "keeps the job beyond it, and it is moved again)")
    metrics_host: str = setting("SYNTH_METRICS_HOST", "127.0.0.1", doc="where `/metrics` and `/healthz` are served")
    metrics_port: int = setting("SYNTH_METRICS_PORT", 9100, ge=0, doc="their port")
    log_level: str = setting("SYNTH_LOG_LEVEL", "INFO", parse=str.upper, fallback="LOG_LEVEL", doc="log level")
    # The model
    backend: Backend = setting("SYNTH_BACKEND", "auto", parse=str.lower, doc="`onnx` (int8 Kokoro on "
                               "onnxruntime), `torch` (hexgrad's KModel), or `auto`: torch where CUDA is available, "
                               "else onnx")
    model_dir: str | None = setting("KOKORO_MODEL_DIR", None, doc="the hub's layout (`config.json`, "
                                    "`kokoro-v1_0.pth`, `voices/*.pt`): weights for torch and every voice pack in it")
    cache_dir: str | None = setting("SYNTH_CACHE_DIR", None, shown="`~/.cache/streamtts`",
                                    doc="the reassembled ONNX model and weights converted from it")
    voices_dir: str | None = setting("SYNTH_VOICES_DIR", None, doc="a folder of more voice packs (`<id>.bin`), "
                                     "read before `KOKORO_MODEL_DIR/voices`; the synth image sets it to the packs it "
                                     "was built with")
    threads: int | None = setting("SYNTH_THREADS", None, gt=0, shown="the cores", doc="inference threads")
    onnx_spin: bool = setting("SYNTH_ONNX_SPIN", False, doc="the onnx backend's threads spin-wait after a run "
                              "(a dedicated CPU may gain a little per chunk; on a shared one they hold the cores that "
                              "the first chunk's encoding, its append and the other services need)")
    default_voice: str = setting("SYNTH_DEFAULT_VOICE", "", doc="the voice offered first; unset or missing: "
                                 "`af_heart` when the model has it, else its first voice (a warning only when a voice "
                                 "set here is missing)")
    bitrate: int = setting("SYNTH_BITRATE", 48_000, gt=0, doc="MP3 bits per second (24 kHz mono)")
    # The chunk cache (chunkcache.py): what the model made, kept for any worker to reuse.
    chunk_cache_bytes: int = setting("SYNTH_CHUNK_CACHE_BYTES", 64 * 1024 * 1024, ge=0, doc="bytes of model "
                                     "output (PCM and word timings) kept in Redis for every worker to reuse, the "
                                     "least recently used evicted past it (`0`: no chunk cache)")
    # A listener waits for the first chunk's encoding: LAME's -q 6 takes about 0.6x the time of
    # its default 3, with its psychoacoustics and noise shaping kept (see mp3.py).
    first_mp3_quality: int = setting("SYNTH_FIRST_MP3_QUALITY", 6, ge=0, le=MAX_LAME_QUALITY, doc="LAME's quality (`0` best and "
                                     "slowest … `9`) of an attempt's first chunk, which its listener waits for; "
                                     "later chunks, encoded while the model works, take LAME's default `3`")
    # Admission within capacity (docs/design.md, "Admission within capacity")
    max_active: int = setting("SYNTH_MAX_ACTIVE", 6, gt=0, doc="hard bound on whole-text casts held at once, "
                              "whatever the measured capacity")
    # At most 1: beyond the measured capacity some listener stalls for sure.
    admit_headroom: float = setting("SYNTH_ADMIT_HEADROOM", 0.7, gt=0, le=1, doc="a worker admits a whole-text cast "
                                    "while its casts' demand fits this share of its model's measured capacity (audio "
                                    "seconds per second); the rest wait before their first audio with a place in line "
                                    "and an estimate")
    capacity_measure_s: float = setting("SYNTH_CAPACITY_MEASURE_S", 10.0, ge=0, doc="audio a worker's model "
                                        "makes before admission trusts its measured capacity (until then it admits "
                                        "one cast at a time)")
    queue_note_s: float = setting("SYNTH_QUEUE_NOTE_S", 2.0, gt=0, doc="how often a worker publishes its capacity "
                                  "and the casts waiting in line get their place and estimate (a `queue` record, "
                                  "written when either changed)")
    queue_notes_max: int = setting("SYNTH_QUEUE_NOTES_MAX", 100, gt=0, doc="the casts at the head of the line "
                                   "that get a `queue` record each round (those behind wait unnoted)")
    queue_horizon_s: float = setting("SYNTH_QUEUE_HORIZON_S", 3600.0, gt=0, doc="an estimate further out than "
                                     "this is left out of the `queue` record")
    poll_s: float = setting("SYNTH_POLL_S", 1.0, gt=0, doc="longest blocking read of `jobs` (and of the "
                            "archiver's receipts); how often the admitter re-checks")
    # Delivery
    lease_s: float = setting("SYNTH_LEASE_S", 60.0, gt=0, doc="a pending job idle this long is taken over by "
                             "another worker; refreshed every third of it")
    max_attempts: int = setting("SYNTH_MAX_ATTEMPTS", 3, gt=0, doc="attempts of one job that failed in the model "
                                "or encoder before `error` and `jobs/dead` (restarts, hand-backs, take-overs and Redis "
                                "errors do not count)")
    max_crashes_per_chunk: int = setting("SYNTH_MAX_CRASHES_PER_CHUNK", 3, gt=0, doc="worker deaths while one "
                                         "chunk was in hand before the cast ends in `error` (a poison input)")
    retry_backoff_s: float = setting("SYNTH_RETRY_BACKOFF_S", 2.0, gt=0,
                                     doc="wait before attempt n+1: backoff × 2^(n−1), capped")
    retry_backoff_max_s: float = setting("SYNTH_RETRY_BACKOFF_MAX_S", 60.0, gt=0, doc="the cap of that wait")
    grace_s: float = setting("SYNTH_GRACE_S", 30.0, gt=0, doc="on SIGTERM: finish the chunk in hand, leave the "
                             "rest pending, exit within this")
    stats_interval_s: float = setting("SYNTH_STATS_INTERVAL_S", 5.0, gt=0,
                                      doc="how often queue depth, lag and Redis memory are polled")
    voices_maxlen: int = 100  # entries kept in `synth/voices` (approximate trim)
    fair_window: int = setting("SYNTH_FAIR_WINDOW", FAIR_WINDOW, gt=0, doc="new jobs a worker reads ahead to admit "
                               "clients in turn (1: first come, first served; another worker does not take them)")
    # Open (live) casts
    max_live: int = setting("SYNTH_MAX_LIVE", 8, gt=0, doc="open (live) casts with something to say that a "
                            "worker admits at once, apart from the whole-text casts (one waiting for text holds no place)")
    # An open cast waiting for text costs a catalog in one blocking read, no model time.
    max_live_held: int = setting("SYNTH_MAX_LIVE_HELD", 64, gt=0, doc="open casts a worker holds at once, those "
                                 "waiting for text included (each client holds at most "
                                 "`INTAKE_LIVE_MAX_OPEN_PER_CLIENT`)")
    # Short, but past the live WebSocket's own limit (INTAKE_LIVE_IDLE_S, 60 s, moved by every
    # fragment: the talk page sends typed text every 150 ms), so a session ends its own text first
    # and this closes only casts nobody watches (an HTTP opener gone, an intake that died).
    live_idle_s: float = setting("SYNTH_LIVE_IDLE_S", 65.0, gt=0, doc="an open cast without new text this long "
                                 "is closed by the worker (its rest is spoken) and its place freed")
    # #35: 16 addresses x 4 empty casts held all 64 places for the 65 s idle limit, over and over; a
    # cast that has said nothing yields its place quickly, but only to a worker that is full, so a
    # talk page whose user thinks before typing keeps its cast otherwise.
    live_empty_s: float = setting("SYNTH_LIVE_EMPTY_S", 5.0, gt=0, doc="while a worker holds "
                                  "`SYNTH_MAX_LIVE_HELD` open casts, one that has had no text at all for this "
                                  "long is closed (empty) and its place freed")
    live_gap_s: float = setting("SYNTH_LIVE_GAP_S", 2.0, gt=0, doc="the longest an open cast's chunk may take "
                                "the model (at its measured speed): a longer sentence is cut, so that a live turn's "
                                "audio messages come less than this apart (Pipecat waits 3 s for the next)")
    live_hold_lead_s: float = setting("SYNTH_LIVE_HOLD_LEAD_S", 10.0, gt=0, doc="while an open cast's next "
                                      "sentence is being typed, a cast leading its listener by more than this waits, "
                                      "keeping the model free for it")
    # The archive (ARCHIVE_URL unset: audio stays in Redis)
    archive: StoreConfig | None = None
    archiver: ArchiverConfig = field(default_factory=ArchiverConfig)

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


# The name every service's config.py gives its settings (python -m synth reads them as Config).
Config = SynthConfig
