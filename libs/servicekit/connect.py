"""Connecting to Redis from ``REDIS_URL``: retry with backoff at start-up, and a health check.

Every service's pooled client shares one set of connection settings (:func:`resilient`): a
command that meets a connection which died with an old server (Redis restarted, failed over) is
retried on a fresh connection, a connection idle for a while is checked before use, and TCP
keepalive finds half-open ones. So once Redis is back, no request fails on a stale connection.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

DEFAULT_URL = "redis://127.0.0.1:6379/0"
CONNECT_ATTEMPTS = 30
BACKOFF_S = 0.2
BACKOFF_MAX_S = 5.0
HEALTH_TIMEOUT_S = 1.0
# Connections per client; callers beyond it wait (up to POOL_TIMEOUT_S) instead of failing.
MAX_CONNECTIONS = 64
POOL_TIMEOUT_S = 10.0
# A command that fails on a lost connection is retried this many times on a fresh one, waiting
# RETRY_BASE_S, doubling up to RETRY_CAP_S (about a second in all: then the caller answers 503).
RETRIES = 3
RETRY_BASE_S = 0.05
RETRY_CAP_S = 0.5
# A pooled connection idle this long is PINGed before use (and replaced if the PING fails).
HEALTH_CHECK_INTERVAL_S = 10


async def connect(
    url: str = DEFAULT_URL,
    *,
    attempts: int = CONNECT_ATTEMPTS,
    backoff_s: float = BACKOFF_S,
    max_connections: int = MAX_CONNECTIONS,
    pool_timeout_s: float = POOL_TIMEOUT_S,
    socket_timeout_s: float | None = None,
) -> Redis:
    """A client for ``url`` once the server answers PING; retries with exponential backoff."""
    client = client_for(url, max_connections, pool_timeout_s=pool_timeout_s, socket_timeout_s=socket_timeout_s)
    delay = backoff_s
    for attempt in range(1, attempts + 1):
        try:
            await client.ping()
            return client
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            if attempt == attempts:
                await client.aclose()
                raise ConnectionError(
                    f"Redis at {redact(url)} did not answer after {attempts} attempts ({exc}); "
                    "check REDIS_URL and that the server is running"
                ) from exc
            log.warning("Redis at %s not reachable (%s); retrying in %.1fs", redact(url), exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)
    raise AssertionError("unreachable")


def client_for(
    url: str,
    max_connections: int = MAX_CONNECTIONS,
    *,
    pool_timeout_s: float = POOL_TIMEOUT_S,
    socket_timeout_s: float | None = None,
) -> Redis:
    """A client whose pool makes callers wait (up to ``pool_timeout_s``) for a free connection
    rather than fail; ``socket_timeout_s`` bounds each reply (None: no bound)."""
    pool = BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=pool_timeout_s, socket_timeout=socket_timeout_s,
        **resilient(),
    )
    return Redis.from_pool(pool)  # the client owns the pool: aclose() closes it too


def resilient() -> dict[str, Any]:
    """The connection settings every service uses: retry on a fresh connection after a
    connection error or timeout, a health check of idle connections, TCP keepalive."""
    return {
        "retry": Retry(ExponentialBackoff(cap=RETRY_CAP_S, base=RETRY_BASE_S), RETRIES),
        "health_check_interval": HEALTH_CHECK_INTERVAL_S,
        "socket_keepalive": True,
    }


async def healthy(client: Redis, timeout_s: float = HEALTH_TIMEOUT_S) -> bool:
    """True when Redis answers PING within ``timeout_s``."""
    try:
        return bool(await asyncio.wait_for(client.ping(), timeout_s))
    except (RedisConnectionError, RedisTimeoutError, OSError, asyncio.TimeoutError):
        return False


def redact(url: str) -> str:
    """The URL without its password, for logs and errors."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}{sep}{user}:***@{host}" if user else f"{scheme}{sep}***@{host}"
