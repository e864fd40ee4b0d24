"""Edge's settings: a frozen struct read once from the environment (the only reader of it).

Each field declares its variable, default and bounds on one line (``servicekit.settings``); the
README's settings table is generated from these lines (``scripts/settings_doc.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from blobstore import StoreConfig
from castlog.rowcache import ROW_CACHE_BYTES
from fanout import LISTENER_QUEUE
from servicekit.connect import CONNECT_ATTEMPTS
from servicekit.settings import API_KEYS, FORWARDED_ALLOW_IPS, REDIS_URL, Settings, setting


@dataclass(frozen=True)
class Config(Settings):
    # #34: one record cache per service; the fan-out's own cache and its setting went.
    removed: ClassVar[Mapping[str, str]] = {
        "EDGE_ITEM_CACHE_BYTES": "edge keeps one record cache: EDGE_ROW_CACHE_BYTES bounds the rows and the "
                                 "records built from them together (80 MiB unless set)",
    }
    host: str = setting("EDGE_HOST", "127.0.0.1", doc="where it listens (containers set `0.0.0.0`)")
    port: int = setting("EDGE_PORT", 8082, ge=0, doc="its port")
    socket: str = setting("EDGE_SOCKET", "", shown="unset", doc="listen on this Unix socket instead of "
                          "`EDGE_HOST`:`EDGE_PORT` (`streamtts up`: in a folder only its user may open)")
    redis_url: str = REDIS_URL.field()
    redis_connect_attempts: int = setting("EDGE_REDIS_CONNECT_ATTEMPTS", CONNECT_ATTEMPTS, gt=0,
                                          doc="connection attempts at start-up, with backoff")
    # A listener that lets its queue fill is demoted to reading by offset: a slow client costs this much memory.
    listener_queue: int = setting("EDGE_LISTENER_QUEUE", LISTENER_QUEUE, gt=0, doc="records queued per listener; "
                                  "a listener that fills it goes back to reading by offset")
    sse_heartbeat_s: float = setting("EDGE_SSE_HEARTBEAT_S", 15.0, gt=0,
                                     doc="a comment line this often keeps idle streams open through proxies")
    # A safety net only: joins wake the shared tail's XREAD (an XADD to its own wake stream).
    tail_block_ms: int = setting("EDGE_TAIL_BLOCK_MS", 5_000, gt=0,
                                 doc="the shared tail's longest blocking XREAD (new casts wake it at once)")
    read_batch: int = setting("EDGE_READ_BATCH", 100, gt=0, doc="records per cast per XREAD of the shared tail, "
                              "and per XRANGE when a listener reads by offset")
    # N listeners catching up on one log read it from Redis about once, and decode it and build its
    # JSON and frames once (castlog.RowCache).
    row_cache_bytes: int = setting("EDGE_ROW_CACHE_BYTES", ROW_CACHE_BYTES, gt=0, doc="bytes of log records kept "
                                   "for listeners catching up (their rows, bodies included, and what was built from "
                                   "them: their JSON and SSE frames), shared by every stream of the process")
    # The per-address token bucket for reads is shared by replicas through Redis.
    read_rate: float = setting("EDGE_READ_RATE", 20.0, gt=0,
                               doc="read requests per second sustained, per client (429 beyond)")
    read_burst: int = setting("EDGE_READ_BURST", 100, gt=0, doc="read requests at once, per client (429 beyond)")
    max_streams_per_client: int = setting("EDGE_MAX_STREAMS_PER_CLIENT", 8, gt=0, doc="open SSE, MP3 and "
                                          "long-poll streams per client address, across all edge replicas (429 beyond)")
    stream_lease_s: float = setting("EDGE_STREAM_LEASE_S", 30.0, gt=0, doc="how long an open stream's seat "
                                    "stands without renewal: the seats of an edge that died free up within it")
    max_listeners: int = setting("EDGE_MAX_LISTENERS", 20_000, gt=0, doc="listeners per process (503 beyond)")
    max_records_limit: int = setting("EDGE_MAX_RECORDS_LIMIT", 100, gt=0,
                                     doc="largest `limit` of `GET /api/casts/{id}/records`")
    max_wait_s: float = setting("EDGE_MAX_WAIT_S", 30.0, ge=0,
                                doc="longest `wait` (long poll) of `GET /api/casts/{id}/records`")
    write_timeout_s: float = setting("EDGE_WRITE_TIMEOUT_S", 30.0, gt=0,
                                     doc="a client that takes no bytes this long is closed (it can resume by id)")
    layout_cache: int = setting("EDGE_LAYOUT_CACHE", 256, gt=0, doc="casts (live or finished) whose state and "
                                "MP3 layout are kept in memory; later reads fetch only new records")
    redis_pool: int = setting("EDGE_REDIS_POOL", 64, gt=0, doc="Redis connections per process "
                              "(offset reads, state, rate limits); a request waits for one")
    forwarded_allow_ips: frozenset[str] = FORWARDED_ALLOW_IPS.field()
    api_keys: frozenset[str] = API_KEYS.field()  # intake's: reads of the general durable streams want one
    shutdown_timeout_s: float = setting("EDGE_SHUTDOWN_TIMEOUT_S", 5.0, ge=0, doc="how long a stop waits; "
                                        "streams that follow a cast are closed at once with a resumable id")
    log_level: str = setting("EDGE_LOG_LEVEL", "INFO", parse=str.upper, doc="log level")
    archive: StoreConfig | None = None  # ARCHIVE_URL and friends: where archived casts' audio is
    # Reads are recorded for retention in memory and written to Redis this often.
    played_flush_s: float = setting("EDGE_PLAYED_FLUSH_S", 60.0, gt=0, doc="reads of casts are noted in memory "
                                    "and written to Redis (`archive/played`, for retention) this often")
    metrics_port: int = setting("EDGE_METRICS_PORT", 0, ge=0, doc="serve `/metrics` on this port instead of the "
                                "public one (k3s: 9102, which the Ingress does not route)")
    # Durable Streams (/v1/stream): waiters share one upstream read per edge.
    ds_long_poll_s: float = setting("EDGE_DS_LONG_POLL_S", 15.0, gt=0,
                                    doc="the longest `live=long-poll` read of `/v1/stream/*` (204 after it)")
    ds_read_max_bytes: int = setting("EDGE_DS_READ_MAX_BYTES", 1024 * 1024, gt=0, doc="bytes of one "
                                     "`/v1/stream/*` catch-up read (at least one append)")
    ds_max_waiters: int = setting("EDGE_DS_MAX_WAITERS", 1024, gt=0, doc="`/v1/stream/*` long-poll and SSE "
                                  "readers waiting at once per edge, on one shared read (503 beyond)")
    ds_sse_max_s: float = setting("EDGE_DS_SSE_MAX_S", 60.0, gt=0, doc="an `/v1/stream/*` SSE response's "
                                  "lifetime; the client reconnects from its offset")
