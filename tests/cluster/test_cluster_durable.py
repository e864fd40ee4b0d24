"""Durable Streams on a real 3-master, 3-replica Redis Cluster: every script (create, fork, append,
close, delete, the release up a fork chain, expiry) keeps its keys in one hash slot, so none is
refused CROSSSLOT, with streams spread over the masters; a fork found through its link from
another process. The names before families would not: a fork's create touched two slots."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import cast

import pytest
from redis.asyncio import Redis, RedisCluster
from redis.crc import key_slot

from durablestreams.keys import OLD_META_PREFIX, keys_of, link_key
from durablestreams.streams import DurableStreams, Spec
from servicekit import connect
from servicekit.connect import is_cluster
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.rule("ds-families")

# A TTL no test outlives, for the streams a test reads after making them all.
HOUR_S = 3600


@pytest.fixture
async def cluster_client(redis_cluster: Cluster) -> AsyncIterator[Redis]:
    redis_cluster.flushall()
    client = await connect(redis_cluster.url)
    assert is_cluster(client)
    try:
        yield client
    finally:
        await client.aclose()


async def _text(streams: DurableStreams, path: str) -> bytes:
    found = await streams.open(path, touch=True)
    assert found.meta is not None, (path, found.status)
    got = await streams.read(found.meta, "0-0", 1 << 20)
    return b"".join(data for _, data in got.entries)


def test_the_old_names_of_a_fork_and_its_source_were_two_slots() -> None:
    assert key_slot((OLD_META_PREFIX + "fork").encode()) != key_slot((OLD_META_PREFIX + "src").encode())


async def test_every_script_of_a_fork_chain_runs_on_a_cluster(cluster_client: Redis, redis_cluster: Cluster) -> None:
    streams = DurableStreams(cluster_client)
    assert (await streams.create("src", Spec("text/plain"), [b"a"])).status == "created"
    ok = await streams.append("src", "text/plain", [b"b"], producer=("p", 0, 0), stream_seq="1")
    assert ok.status == "ok" and ok.meta is not None
    assert (await streams.create("fork", Spec("text/plain", source="src", fork_at=ok.meta.tail), [])).status \
        == "created"
    assert (await streams.append("fork", "text/plain", [b"c"], producer=("p", 0, 0))).status == "ok"
    fork = (await streams.open("fork", touch=False)).meta
    assert fork is not None and fork.family == "src"
    assert (await streams.create("deeper", Spec("text/plain", source="fork", fork_at=fork.tail), [b"d"])).status \
        == "created"
    assert await _text(DurableStreams(cluster_client), "deeper") == b"abcd"  # a fresh process: through the link
    assert (await streams.append("fork", "", [], close=True)).status == "ok"
    assert await streams.delete("src") == "soft"  # forks still read it
    assert await streams.delete("fork") == "soft"
    assert await _text(streams, "deeper") == b"abcd"
    assert await streams.delete("deeper") == "deleted"  # and the chain goes with it
    assert await cluster_client.exists(*keys_of("src")) == 0
    assert await cluster_client.exists(*keys_of("fork", "src")) == 0
    # the forks' links (each in its own path's slot) went with their streams
    assert await cluster_client.exists(link_key("fork"), link_key("deeper")) == 0


async def test_streams_spread_over_the_masters_and_expire(cluster_client: Redis, redis_cluster: Cluster) -> None:
    """The streams read live longer than any machine takes to make them; the ones that lapse are
    waited for (however slowly their second passes), then found removed."""
    streams = DurableStreams(cluster_client)
    paths = [f"spread/{n}" for n in range(24)]
    for path in paths:
        assert (await streams.create(path, Spec("text/plain", ttl=HOUR_S), [path.encode()])).status == "created"
    lapsing = [f"lapse/{n}" for n in range(6)]
    for path in lapsing:
        assert (await streams.create(path, Spec("text/plain", ttl=1), [b"x"])).status == "created"
    routes = cast(RedisCluster, cluster_client)  # the client's slot map: no redis-cli per key on a busy machine
    masters = {node.port for node in routes.get_primaries()}
    assert len(masters) == 3
    for spread in (paths, lapsing):  # both on every master
        assert {routes.get_node_from_key(keys_of(p)[0]).port for p in spread} == masters
    assert [await _text(streams, p) for p in paths] == [p.encode() for p in paths]

    async def all_lapsed() -> bool:
        return all([(await streams.open(p, touch=False)).status == "missing" for p in lapsing])

    await wait_until(all_lapsed)  # lapsed, and removed
    assert await cluster_client.exists(*(k for p in lapsing for k in keys_of(p))) == 0
    assert [await _text(streams, p) for p in paths[:3]] == [p.encode() for p in paths[:3]]


@pytest.mark.rule("ds-one-upstream-read")
async def test_edge_s_waiters_wake_on_streams_of_many_slots(cluster_client: Redis, redis_cluster: Cluster) -> None:
    from castlog import LogReader
    from edge.app import TAIL_CLIENT_NAME, WAKE_NAME
    from edge.metrics import EdgeMetrics
    from fanout import Tail  # edge's shared tail, its waiters' read on the cluster

    streams = DurableStreams(cluster_client)
    paths = [f"wait/{n}" for n in range(6)]  # families on every master
    metas = []
    for path in paths:
        created = await streams.create(path, Spec("text/plain"), [b"first"])
        assert created.meta is not None
        metas.append(created.meta)
    conn = Redis.from_url(redis_cluster.url, single_connection_client=True, client_name=TAIL_CLIENT_NAME,
                          socket_timeout=15)
    tail = Tail(conn, cluster_client, EdgeMetrics().tail, reader=LogReader(cluster_client), block_ms=5000,
                wake=WAKE_NAME)
    tail.start()
    try:
        waits = [asyncio.ensure_future(tail.waiters.wait(m.log, m.tail, 30)) for m in metas]
        await asyncio.sleep(0.2)
        assert not any(w.done() for w in waits), "nothing new yet"
        for path in paths:
            assert (await streams.append(path, "text/plain", [b"next"])).status == "ok"
        assert await asyncio.gather(*waits) == [True] * len(paths)  # each woken (not timed out)
    finally:
        await tail.stop()
        await conn.aclose()


async def test_the_v1_stream_routes_run_on_a_cluster(cluster_client: Redis, redis_cluster: Cluster) -> None:
    """intake's writes and edge's reads through their app factories behind the proxy, on the cluster."""
    from aiohttp import ClientSession

    from tests.durable.conftest import serving_origin

    async with serving_origin(cluster_client, redis_cluster.url) as base, ClientSession() as http:
        text = {"Content-Type": "text/plain"}
        async with http.put(f"{base}/v1/stream/web", headers=text, data=b"one ") as response:
            assert response.status == 201, await response.text()
            offset = response.headers["Stream-Next-Offset"]
        async with http.put(f"{base}/v1/stream/web/fork", headers={"Stream-Forked-From": "/v1/stream/web"},
                            skip_auto_headers=["Content-Type"]) as response:
            assert response.status == 201, await response.text()
        polling = asyncio.ensure_future(http.get(f"{base}/v1/stream/web/fork", params={"offset": offset,
                                                                                       "live": "long-poll"}))
        await asyncio.sleep(0.3)
        async with http.post(f"{base}/v1/stream/web/fork", headers=text, data=b"two") as response:
            assert response.status == 204
        async with await polling as response:
            assert response.status == 200 and await response.read() == b"two"
        async with http.get(f"{base}/v1/stream/web/fork", params={"offset": "-1"}) as response:
            assert await response.read() == b"one two"
