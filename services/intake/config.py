"""Intake's settings: a frozen struct read once from the environment (the only reader of it)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from blobstore import StoreConfig
from servicekit import Settings, comma_set, require_non_negative, require_positive
from servicekit.connect import CONNECT_ATTEMPTS, DEFAULT_URL

# The default voice when a worker has it; unset (or one no worker has): the workers' own default.
DEFAULT_VOICE = ""
# The longest text one cast may hold (characters, after normalisation).
MAX_CHARS = 100_000
# A maximal text, pasted as CJK into a form, is 3 UTF-8 bytes x 3 for percent-encoding = 9 bytes
# per character: 1 MiB leaves room for that and still stops a runaway upload early.
MAX_BODY_BYTES = 1024 * 1024
MAX_TITLE_CHARS = 200
# A cast costs GPU minutes: one per second sustained per client, 30 at once.
RATE_PER_S = 1.0
BURST = 30
FORWARDED_ALLOW_IPS = "127.0.0.1,::1"
# How long the voice list read from `synth/voices` is trusted before it is read again.
VOICES_REFRESH_S = 5.0
# Submits using Redis at once (each holds one pooled connection), and submits that may wait for
# a turn; past both intake sheds load with 503 instead of queueing without bound.
MAX_INFLIGHT = 64
MAX_WAITING = 1024
SHUTDOWN_TIMEOUT_S = 10.0
# Live sessions (the WebSocket): at most this many at once, each holding one Redis connection
# for its audio; one closes after this long without a message from its client while its text is
# open; pings keep it alive through proxies; a client that has not taken a frame for this long is
# cut off (it resumes listening by link from the position it is told).
LIVE_MAX_SESSIONS = 256
LIVE_IDLE_S = 60.0
LIVE_PING_S = 20.0
LIVE_SEND_TIMEOUT_S = 10.0
LIVE_MAX_MESSAGE_BYTES = 64 * 1024
# `/v1/audio/speech` streams open at once (each holds a connection for its blocking reads), and
# how long one waits for a client that takes no bytes before closing it.
MAX_SPEECH_STREAMS = 64
SPEECH_WRITE_TIMEOUT_S = 30.0
# The most bytes one durable stream (/v1/stream/*) holds: an append past it is refused (413).
DS_MAX_STREAM_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 8081
    redis_url: str = DEFAULT_URL
    redis_connect_attempts: int = CONNECT_ATTEMPTS
    max_chars: int = MAX_CHARS
    max_body_bytes: int = MAX_BODY_BYTES
    max_title_chars: int = MAX_TITLE_CHARS
    rate: float = RATE_PER_S
    burst: int = BURST
    forwarded_allow_ips: frozenset[str] = comma_set(FORWARDED_ALLOW_IPS)
    default_voice: str = DEFAULT_VOICE
    voices_refresh_s: float = VOICES_REFRESH_S
    max_inflight: int = MAX_INFLIGHT
    max_waiting: int = MAX_WAITING
    shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S
    live_max_sessions: int = LIVE_MAX_SESSIONS
    live_idle_s: float = LIVE_IDLE_S
    live_ping_s: float = LIVE_PING_S
    live_send_timeout_s: float = LIVE_SEND_TIMEOUT_S
    live_max_message_bytes: int = LIVE_MAX_MESSAGE_BYTES
    log_level: str = "INFO"
    admin_token: str | None = field(default=None, repr=False)  # STREAMTTS_ADMIN_TOKEN: DELETE /api/casts/{id}
    max_speech_streams: int = MAX_SPEECH_STREAMS
    speech_write_timeout_s: float = SPEECH_WRITE_TIMEOUT_S
    ds_max_stream_bytes: int = DS_MAX_STREAM_BYTES
    api_keys: frozenset[str] = frozenset()  # empty: no auth
    # ARCHIVE_URL and friends, as edge's: a repeat of an archived cast reads its audio there
    archive: StoreConfig | None = None

    def __post_init__(self) -> None:
        require_positive({
            "INTAKE_MAX_CHARS": self.max_chars,
            "INTAKE_MAX_BODY_BYTES": self.max_body_bytes,
            "INTAKE_MAX_TITLE_CHARS": self.max_title_chars,
            "INTAKE_RATE": self.rate,
            "INTAKE_BURST": self.burst,
            "INTAKE_MAX_INFLIGHT": self.max_inflight,
            "INTAKE_LIVE_MAX_SESSIONS": self.live_max_sessions,
            "INTAKE_LIVE_IDLE_S": self.live_idle_s,
            "INTAKE_LIVE_PING_S": self.live_ping_s,
            "INTAKE_LIVE_SEND_TIMEOUT_S": self.live_send_timeout_s,
            "INTAKE_LIVE_MAX_MESSAGE_BYTES": self.live_max_message_bytes,
            "INTAKE_MAX_SPEECH_STREAMS": self.max_speech_streams,
            "INTAKE_SPEECH_WRITE_TIMEOUT_S": self.speech_write_timeout_s,
            "INTAKE_DS_MAX_STREAM_BYTES": self.ds_max_stream_bytes,
        })
        require_non_negative({"INTAKE_MAX_WAITING": self.max_waiting})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        get = Settings(os.environ if environ is None else environ).get
        d = cls()
        return cls(
            host=get("INTAKE_HOST", str, d.host),
            port=get("INTAKE_PORT", int, d.port),
            redis_url=get("REDIS_URL", str, d.redis_url),
            redis_connect_attempts=get("INTAKE_REDIS_CONNECT_ATTEMPTS", int, d.redis_connect_attempts),
            max_chars=get("INTAKE_MAX_CHARS", int, d.max_chars),
            max_body_bytes=get("INTAKE_MAX_BODY_BYTES", int, d.max_body_bytes),
            max_title_chars=get("INTAKE_MAX_TITLE_CHARS", int, d.max_title_chars),
            rate=get("INTAKE_RATE", float, d.rate),
            burst=get("INTAKE_BURST", int, d.burst),
            forwarded_allow_ips=get("FORWARDED_ALLOW_IPS", comma_set, d.forwarded_allow_ips),
            default_voice=get("INTAKE_DEFAULT_VOICE", str, d.default_voice),
            voices_refresh_s=get("INTAKE_VOICES_REFRESH_S", float, d.voices_refresh_s),
            max_inflight=get("INTAKE_MAX_INFLIGHT", int, d.max_inflight),
            max_waiting=get("INTAKE_MAX_WAITING", int, d.max_waiting),
            shutdown_timeout_s=get("INTAKE_SHUTDOWN_TIMEOUT_S", float, d.shutdown_timeout_s),
            live_max_sessions=get("INTAKE_LIVE_MAX_SESSIONS", int, d.live_max_sessions),
            live_idle_s=get("INTAKE_LIVE_IDLE_S", float, d.live_idle_s),
            live_ping_s=get("INTAKE_LIVE_PING_S", float, d.live_ping_s),
            live_send_timeout_s=get("INTAKE_LIVE_SEND_TIMEOUT_S", float, d.live_send_timeout_s),
            live_max_message_bytes=get("INTAKE_LIVE_MAX_MESSAGE_BYTES", int, d.live_max_message_bytes),
            log_level=get("INTAKE_LOG_LEVEL", str.upper, d.log_level),
            admin_token=get("STREAMTTS_ADMIN_TOKEN", str, None) or None,
            max_speech_streams=get("INTAKE_MAX_SPEECH_STREAMS", int, d.max_speech_streams),
            speech_write_timeout_s=get("INTAKE_SPEECH_WRITE_TIMEOUT_S", float, d.speech_write_timeout_s),
            ds_max_stream_bytes=get("INTAKE_DS_MAX_STREAM_BYTES", int, d.ds_max_stream_bytes),
            api_keys=get("STREAMTTS_API_KEYS", comma_set, d.api_keys),
            archive=StoreConfig.from_settings(get),
        )
