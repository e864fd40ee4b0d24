"""servicekit's connect finds cluster mode from REDIS_URL alone, and its cluster client handles
redis-py's known pitfalls (COMMAND GETKEYS before XREAD, the 5 s socket timeout, the per-node
connection cap), on a real 3-master, 3-replica Redis Cluster."""

from __future__ import annotations

import asyncio

from jobstreams import read_jobs
from redis.asyncio import Redis

from castlog import CastStore, LogReader, Meta
from castlog.ids import content_id
from castlog.marks import stamps
from servicekit import connect
from servicekit.connect import is_cluster
from tests.support.cluster import Cluster


def getkeys_calls(cluster: Cluster) -> int:
    total = 0
    for node in cluster.live():
        for line in cluster.cli(node.port, "INFO", "commandstats").splitlines():
            if line.startswith("cmdstat_command|getkeys:"):
                total += int(line.split("calls=", 1)[1].split(",", 1)[0])
    return total


async def test_a_single_redis_gets_a_plain_client(redis_url: str) -> None:
    client = await connect(redis_url)
    try:
        assert not is_cluster(client) and isinstance(client, Redis)
    finally:
        await client.aclose()


async def test_cluster_mode_is_found_from_the_url_alone(redis_cluster: Cluster) -> None:
    client = await connect(redis_cluster.url)
    try:
        assert is_cluster(client)
        # keys on every master: the client follows the slots (a MOVED would be followed too)
        for i in range(50):
            await client.set(f"k{i}", i)
        assert int(await client.get("k7")) == 7
    finally:
        await client.aclose()


async def test_xread_is_routed_without_command_getkeys(redis_cluster: Cluster) -> None:
    client = await connect(redis_cluster.url)
    try:
        await client.xadd("pub/{l3}/a", {"e": "x"})
        await client.xadd("pub/{l3}/b", {"e": "y"})
        before = getkeys_calls(redis_cluster)
        for _ in range(5):
            got = await client.xread({"pub/{l3}/a": "0", "pub/{l3}/b": "0"}, count=10)
            assert len(got) == 2
        await client.xgroup_create("pub/{l3}/a", "g", id="0")
        assert await client.xreadgroup("g", "c", {"pub/{l3}/a": ">"}, count=10)
        assert getkeys_calls(redis_cluster) == before
    finally:
        await client.aclose()


async def test_a_full_node_pool_makes_callers_wait_not_fail(redis_cluster: Cluster) -> None:
    client = await connect(redis_cluster.url, max_connections=1, pool_timeout_s=10)
    try:
        await client.xadd("q/{l5}", {"e": "x"})
        blocked = asyncio.ensure_future(client.xread({"q/{l5}": "$"}, block=300))
        await asyncio.sleep(0.05)
        # same node (same slot), its only connection is in the blocked read: this one waits
        assert await client.xlen("q/{l5}") == 1
        assert await blocked is not None
    finally:
        await client.aclose()


async def test_a_block_longer_than_redis_py_s_default_socket_timeout(redis_cluster: Cluster) -> None:
    client = await connect(redis_cluster.url)  # socket_timeout_s None: unbounded, as for one Redis
    try:
        await client.xadd("long/{l9}", {"e": "x"})
        assert not await client.xread({"long/{l9}": "$"}, block=5600)  # redis-py's default is 5 s
    finally:
        await client.aclose()


async def test_a_valkey_cluster_takes_the_same_submits(valkey_cluster: Cluster) -> None:
    """Valkey's cluster speaks the same protocol: found from the URL, the lanes' scripts run."""
    valkey_cluster.flushall()
    client = await connect(valkey_cluster.url)
    try:
        assert is_cluster(client)
        store = CastStore(client, replicas=1, wait_ms=3000)
        for i in range(6):
            text = f"A cast on Valkey, number {i}."
            meta = Meta(title="v", voice="af_heart", chars=len(text), sentences=1, created_at=0)
            assert await store.submit(content_id(text, "af_heart"), text, "af_heart", meta) == "new"
        assert len(await read_jobs(client)) == 6
    finally:
        await client.aclose()


async def test_read_only_scripts_are_routed_without_command_getkeys(redis_cluster: Cluster) -> None:
    """HEADERS (a layout without bodies), MARK and STAMPS (the tail's checks, one script per slot)."""
    redis_cluster.flushall()
    client = await connect(redis_cluster.url)
    try:
        ids = [content_id(f"read-only {n}", "af_heart") for n in range(6)]  # six slots, on every master
        for cid in ids:
            await CastStore(client).append(cid, 0, [Meta(title="t", voice="af_heart", chars=1, sentences=1, created_at=0)])
        reader = LogReader(client)
        before = getkeys_calls(redis_cluster)
        for cid in ids:
            assert (await reader.last_row(cid, bodies=False)) is not None  # HEADERS
        found = await stamps(client, [(cid, 0) for cid in ids] + [(ids[0], 5)])
        assert all(found[:-1]) and found[-1] is None
        assert getkeys_calls(redis_cluster) == before
    finally:
        await client.aclose()
