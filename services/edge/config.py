"""Edge's settings: a frozen struct read once from the environment (the only reader of it)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from blobstore import StoreConfig
from servicekit import ConfigError as ConfigError  # what a bad setting raises; callers import it from here
from servicekit import Settings, comma_set, require_non_negative, require_positive
from servicekit.connect import CONNECT_ATTEMPTS, DEFAULT_URL

# A listener's queue holds at most this many records; a listener that lets it fill is demoted
# to reading by offset, so a slow client costs this much memory and no more.
LISTENER_QUEUE = 64
# SSE comment sent on an idle stream so that proxies and browsers keep it open.
SSE_HEARTBEAT_S = 15.0
# The shared tail's blocking XREAD: a safety net only, joins wake it with CLIENT UNBLOCK.
TAIL_BLOCK_MS = 5_000
# Records per cast per XREAD of the shared tail, and per XRANGE of an offset reader.
READ_BATCH = 100
# Per-address token bucket for reads (shared by replicas through Redis).
READ_RATE_PER_S = 20.0
READ_BURST = 100
# Open SSE / MP3 / long-poll connections per address, counted across every edge replica.
MAX_STREAMS_PER_CLIENT = 8
# An open stream's slot lapses this long after its edge stops renewing it (an edge that died).
STREAM_LEASE_S = 30.0
# Open live listeners per edge process; beyond it new streams are shed with 503.
MAX_LISTENERS = 20_000
# Records per JSON page, and the longest long-poll.
MAX_RECORDS_LIMIT = 100
MAX_WAIT_S = 30.0
# A write to a client that does not drain for this long closes the stream (it can resume).
WRITE_TIMEOUT_S = 30.0
# Casts (live or finished) whose scanned layout (state + playable chunks) is kept in memory.
LAYOUT_CACHE = 256
# Connections of the shared pool (offset reads, state, rate limits); a request waits for one.
REDIS_POOL = 64
FORWARDED_ALLOW_IPS = "127.0.0.1,::1"
SHUTDOWN_TIMEOUT_S = 5.0
# Reads of casts are recorded for retention in memory and written to Redis this often.
PLAYED_FLUSH_S = 60.0
# Durable streams (/v1/stream): the longest long-poll, the bytes of one read (at least one
# append), readers waiting at once per edge (on one shared read), an SSE stream's lifetime.
DS_LONG_POLL_S = 15.0
DS_READ_MAX_BYTES = 1024 * 1024
DS_MAX_WAITERS = 1024
DS_SSE_MAX_S = 60.0


@dataclass(frozen=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 8082
    redis_url: str = DEFAULT_URL
    redis_connect_attempts: int = CONNECT_ATTEMPTS
    listener_queue: int = LISTENER_QUEUE
    sse_heartbeat_s: float = SSE_HEARTBEAT_S
    tail_block_ms: int = TAIL_BLOCK_MS
    read_batch: int = READ_BATCH
    read_rate: float = READ_RATE_PER_S
    read_burst: int = READ_BURST
    max_streams_per_client: int = MAX_STREAMS_PER_CLIENT
    stream_lease_s: float = STREAM_LEASE_S
    max_listeners: int = MAX_LISTENERS
    max_records_limit: int = MAX_RECORDS_LIMIT
    max_wait_s: float = MAX_WAIT_S
    write_timeout_s: float = WRITE_TIMEOUT_S
    layout_cache: int = LAYOUT_CACHE
    redis_pool: int = REDIS_POOL
    forwarded_allow_ips: frozenset[str] = comma_set(FORWARDED_ALLOW_IPS)
    shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S
    log_level: str = "INFO"
    archive: StoreConfig | None = None  # ARCHIVE_URL and friends: where archived casts' audio is
    played_flush_s: float = PLAYED_FLUSH_S
    metrics_port: int = 0  # EDGE_METRICS_PORT: /metrics on its own port (off the public one); 0: on port
    ds_long_poll_s: float = DS_LONG_POLL_S
    ds_read_max_bytes: int = DS_READ_MAX_BYTES
    ds_max_waiters: int = DS_MAX_WAITERS
    ds_sse_max_s: float = DS_SSE_MAX_S

    def __post_init__(self) -> None:
        require_positive({
            "EDGE_LISTENER_QUEUE": self.listener_queue,
            "EDGE_SSE_HEARTBEAT_S": self.sse_heartbeat_s,
            "EDGE_TAIL_BLOCK_MS": self.tail_block_ms,
            "EDGE_READ_BATCH": self.read_batch,
            "EDGE_READ_RATE": self.read_rate,
            "EDGE_READ_BURST": self.read_burst,
            "EDGE_MAX_STREAMS_PER_CLIENT": self.max_streams_per_client,
            "EDGE_STREAM_LEASE_S": self.stream_lease_s,
            "EDGE_MAX_LISTENERS": self.max_listeners,
            "EDGE_MAX_RECORDS_LIMIT": self.max_records_limit,
            "EDGE_WRITE_TIMEOUT_S": self.write_timeout_s,
            "EDGE_LAYOUT_CACHE": self.layout_cache,
            "EDGE_REDIS_POOL": self.redis_pool,
            "EDGE_PLAYED_FLUSH_S": self.played_flush_s,
            "EDGE_DS_LONG_POLL_S": self.ds_long_poll_s,
            "EDGE_DS_READ_MAX_BYTES": self.ds_read_max_bytes,
            "EDGE_DS_MAX_WAITERS": self.ds_max_waiters,
            "EDGE_DS_SSE_MAX_S": self.ds_sse_max_s,
        })
        require_non_negative({"EDGE_MAX_WAIT_S": self.max_wait_s})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        get = Settings(os.environ if environ is None else environ).get
        d = cls()
        return cls(
            host=get("EDGE_HOST", str, d.host),
            port=get("EDGE_PORT", int, d.port),
            redis_url=get("REDIS_URL", str, d.redis_url),
            redis_connect_attempts=get("EDGE_REDIS_CONNECT_ATTEMPTS", int, d.redis_connect_attempts),
            listener_queue=get("EDGE_LISTENER_QUEUE", int, d.listener_queue),
            sse_heartbeat_s=get("EDGE_SSE_HEARTBEAT_S", float, d.sse_heartbeat_s),
            tail_block_ms=get("EDGE_TAIL_BLOCK_MS", int, d.tail_block_ms),
            read_batch=get("EDGE_READ_BATCH", int, d.read_batch),
            read_rate=get("EDGE_READ_RATE", float, d.read_rate),
            read_burst=get("EDGE_READ_BURST", int, d.read_burst),
            max_streams_per_client=get("EDGE_MAX_STREAMS_PER_CLIENT", int, d.max_streams_per_client),
            stream_lease_s=get("EDGE_STREAM_LEASE_S", float, d.stream_lease_s),
            max_listeners=get("EDGE_MAX_LISTENERS", int, d.max_listeners),
            max_records_limit=get("EDGE_MAX_RECORDS_LIMIT", int, d.max_records_limit),
            max_wait_s=get("EDGE_MAX_WAIT_S", float, d.max_wait_s),
            write_timeout_s=get("EDGE_WRITE_TIMEOUT_S", float, d.write_timeout_s),
            layout_cache=get("EDGE_LAYOUT_CACHE", int, d.layout_cache),
            redis_pool=get("EDGE_REDIS_POOL", int, d.redis_pool),
            forwarded_allow_ips=get("FORWARDED_ALLOW_IPS", comma_set, d.forwarded_allow_ips),
            shutdown_timeout_s=get("EDGE_SHUTDOWN_TIMEOUT_S", float, d.shutdown_timeout_s),
            log_level=get("EDGE_LOG_LEVEL", str.upper, d.log_level),
            archive=StoreConfig.from_settings(get),
            played_flush_s=get("EDGE_PLAYED_FLUSH_S", float, d.played_flush_s),
            metrics_port=get("EDGE_METRICS_PORT", int, d.metrics_port),
            ds_long_poll_s=get("EDGE_DS_LONG_POLL_S", float, d.ds_long_poll_s),
            ds_read_max_bytes=get("EDGE_DS_READ_MAX_BYTES", int, d.ds_read_max_bytes),
            ds_max_waiters=get("EDGE_DS_MAX_WAITERS", int, d.ds_max_waiters),
            ds_sse_max_s=get("EDGE_DS_SSE_MAX_S", float, d.ds_sse_max_s),
        )
