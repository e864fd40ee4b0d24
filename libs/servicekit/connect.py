"""Connecting to Redis from ``REDIS_URL``: retry with backoff at start-up, and a health check.

Every service's pooled client shares one set of connection settings (:func:`resilient`): a
command that meets a connection which died with an old server (Redis restarted, failed over) is
retried on a fresh connection, a connection idle for a while is checked before use, and TCP
keepalive finds half-open ones. So once Redis is back, no request fails on a stale connection.

Cluster mode is found from ``REDIS_URL`` alone: a server whose ``INFO cluster`` says
``cluster_enabled:1`` gets redis-py's asyncio ``RedisCluster`` (:class:`LaneCluster`), which
speaks the same commands, so the services run one code path (castlog/keys.py puts the keys of
one atomic step in one slot). The cluster client's known pitfalls are handled there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any, cast

from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MaxConnectionsError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

DEFAULT_URL = "redis://127.0.0.1:6379/0"
CONNECT_ATTEMPTS = 30
# Between retries while Redis is away (connect, a tail's reads): this, doubling up to the max.
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
# A cluster client whose node has no free connection looks again this often (LaneCluster).
POOL_POLL_S = 0.005
# A shared tail's blocking read answers within its block time; its socket waits this much longer.
TAIL_SOCKET_MARGIN_S = 10.0


async def connect(
    url: str = DEFAULT_URL,
    *,
    attempts: int = CONNECT_ATTEMPTS,
    backoff_s: float = BACKOFF_S,
    max_connections: int = MAX_CONNECTIONS,
    pool_timeout_s: float = POOL_TIMEOUT_S,
    socket_timeout_s: float | None = None,
) -> Redis:
    """A client for ``url`` once the server answers PING; retries with exponential backoff.
    A server in cluster mode gets a cluster client (:class:`LaneCluster`) with the same bounds."""
    client = client_for(url, max_connections, pool_timeout_s=pool_timeout_s, socket_timeout_s=socket_timeout_s)
    for attempt, delay in zip(range(1, attempts + 1), backoff(backoff_s)):
        try:
            await client.ping()
            if not await cluster_enabled(client):
                return client
            cluster = client_for(
                url, max_connections, pool_timeout_s=pool_timeout_s, socket_timeout_s=socket_timeout_s, cluster=True
            )
            try:
                await cluster.ping()  # (RedisCluster learns the slots on its first command)
            except BaseException:
                await cluster.aclose()  # its nodes' connections go; the plain client stays for the retry
                raise
            await client.aclose()
            return cluster
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            if attempt == attempts:
                await client.aclose()
                raise ConnectionError(
                    f"Redis at {redact(url)} did not answer after {attempts} attempts ({exc}); "
                    "check REDIS_URL and that the server is running"
                ) from exc
            log.warning("Redis at %s not reachable (%s); retrying in %.1fs", redact(url), exc, delay)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


def backoff(first_s: float = BACKOFF_S, cap_s: float = BACKOFF_MAX_S) -> Iterator[float]:
    """The waits between retries: ``first_s``, doubling up to ``cap_s`` (a new one after a success)."""
    delay = first_s
    while True:
        yield delay
        delay = min(delay * 2, cap_s)


def tail_connection(url: str, name: str, block_ms: int) -> Redis:
    """The dedicated connection of a process's shared tail (``fanout.Tail``): named ``name`` so that
    CLIENT LIST shows which is the service's XREAD, its socket waiting out a read's ``block_ms``."""
    return Redis.from_url(url, single_connection_client=True, client_name=name,
                          socket_timeout=block_ms / 1000 + TAIL_SOCKET_MARGIN_S)


def client_for(
    url: str,
    max_connections: int = MAX_CONNECTIONS,
    *,
    pool_timeout_s: float = POOL_TIMEOUT_S,
    socket_timeout_s: float | None = None,
    cluster: bool = False,
) -> Redis:
    """A client whose pool makes callers wait (up to ``pool_timeout_s``) for a free connection
    rather than fail; ``socket_timeout_s`` bounds each reply (None: no bound). ``cluster``: a
    :class:`LaneCluster` (:func:`connect` finds out; :func:`is_cluster` tells a client's kind)."""
    if cluster:
        # A LaneCluster answers every command a Redis does (the typing says Redis so that every
        # caller keeps one type; is_cluster() tells them apart where it matters).
        return cast(Redis, LaneCluster.from_url(
            url, max_connections=max_connections, socket_timeout=socket_timeout_s,
            pool_wait_s=pool_timeout_s, **resilient(),
        ))
    pool = BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=pool_timeout_s, socket_timeout=socket_timeout_s,
        **resilient(),
    )
    return Redis.from_pool(pool)  # the client owns the pool: aclose() closes it too


async def cluster_enabled(client: Redis) -> bool:
    """``INFO cluster`` says ``cluster_enabled:1`` (a user not allowed INFO: taken as no cluster)."""
    try:
        info = await client.info("cluster")
    except ResponseError:
        return False
    return bool(info.get("cluster_enabled"))


def is_cluster(client: object) -> bool:
    return isinstance(client, RedisCluster)


class LaneCluster(RedisCluster):
    """redis-py's asyncio cluster client with its known pitfalls handled:

    - XREAD / XREADGROUP have "movable keys": redis-py asks a node ``COMMAND GETKEYS`` before
      each one (a round trip, and a pooled connection taken while the read's own may be the
      last free one). Their slot is computed here from the STREAMS keys instead (all of one
      call's keys must share a slot anyway: one lane, castlog/keys.py).
    - EVAL_RO / EVALSHA_RO (castlog's read-only scripts: HEADERS, STAMPS, MARK) would take the
      same ``COMMAND GETKEYS`` detour (redis-py special-cases only EVAL / EVALSHA): routed by their
      declared keys here too.
    - its default socket timeout (5 s) is shorter than a long ``BLOCK``: the caller's
      ``socket_timeout_s`` is passed on as is (None: unbounded, as for a single Redis), so a
      blocked read's connection must be given one above its BLOCK.
    - a node's connection cap raises ``MaxConnectionsError`` at once when full: a command waits
      for a free connection (up to ``pool_wait_s``, as BlockingConnectionPool does) instead.
    - MOVED and ASK (a slot migration, a failover) are followed by redis-py itself; a read
      blocked on a node that fails ends in a ConnectionError, and the client re-learns the
      slots before its next command (its caller retries, as it does when a single Redis restarts).
    """

    def __init__(self, *args: Any, pool_wait_s: float = POOL_TIMEOUT_S, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pool_wait_s = pool_wait_s

    async def _determine_slot(self, command: str, *args: Any) -> int:
        name = command.upper()
        if name in ("XREAD", "XREADGROUP"):
            return self._streams_slot(command, args)
        if name in ("EVAL_RO", "EVALSHA_RO") and len(args) >= 2 and int(args[1]) > 0:
            return self._same_slot(command, args[2 : 2 + int(args[1])])  # as redis-py does for EVALSHA
        return await super()._determine_slot(command, *args)

    def _streams_slot(self, command: str, args: tuple[Any, ...]) -> int:
        words = [a.upper() if isinstance(a, str) else a for a in args]
        at = next((i for i, w in enumerate(words) if w in ("STREAMS", b"STREAMS")), None)
        if at is None:
            raise ResponseError(f"{command} without STREAMS")
        rest = args[at + 1 :]
        return self._same_slot(command, rest[: len(rest) // 2])

    def _same_slot(self, command: str, names: Any) -> int:
        slots = {self.keyslot(name) for name in names}
        if len(slots) != 1:
            raise ResponseError(f"{command} - all keys must map to the same key slot (one lane per call)")
        return slots.pop()

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + self.pool_wait_s
        while True:
            try:
                return await super().execute_command(*args, **kwargs)
            except MaxConnectionsError:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(POOL_POLL_S)


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
