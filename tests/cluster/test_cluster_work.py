"""The whole write path on a real 3-master, 3-replica Redis Cluster: submits spread over the
lanes, a worker (a stand-in synthesizer at GPU speed) takes them through the lane mover, every
cast reaches eos; and a master killed with SIGKILL mid-work loses no acknowledged cast."""

from __future__ import annotations

import asyncio

import pytest
from redis.exceptions import RedisError

import castlog
from castlog import CastStore, Eos
from castlog.batching import NotReplicated
from servicekit import connect
from synth.worker import Worker
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from tests.synth.support import StandIn, config, has_audio, running, submit, terminal

# A stand-in at GPU speed: a second of speech in 20 ms.
GPU_RTF = 0.02
WAIT_MS = 3000


def text(i: int) -> str:
    return f"Cast number {i} on the cluster. It has two sentences."


@pytest.mark.rule("one-slot-per-step")
async def test_casts_spread_over_the_lanes_reach_eos(redis_cluster: Cluster) -> None:
    redis_cluster.flushall()
    redis = await connect(redis_cluster.url)
    store = CastStore(redis, replicas=1, wait_ms=WAIT_MS)
    try:
        worker = Worker(config("cluster-worker", wait_replicas=1, wait_timeout_ms=WAIT_MS), redis, StandIn(GPU_RTF))
        async with running(worker):
            ids = await asyncio.gather(*(submit(store, text(i)) for i in range(24)))
            assert len({castlog.keys.lane_of(c) for c in ids}) > 10  # spread over many lanes, so all masters
            for cast_id in ids:
                entries = await terminal(store, cast_id, 60)
                assert isinstance(entries[-1].record, Eos)
        masters_with_logs = {redis_cluster.master_of(castlog.cast_key(c)).port for c in ids}
        assert len(masters_with_logs) == 3
    finally:
        await redis.aclose()


@pytest.mark.rule("ack-replicated")
@pytest.mark.timeout(300)
async def test_a_master_killed_mid_work_loses_no_acknowledged_cast(redis_cluster: Cluster) -> None:
    redis_cluster.flushall()
    redis = await connect(redis_cluster.url)
    store = CastStore(redis, replicas=1, wait_ms=1000)
    # the node of the workers' inbox `jobs`: its failover is the hardest (every job passes there)
    victim = redis_cluster.master_of(castlog.JOBS)
    acknowledged: list[str] = []
    refused = 0

    async def answered(n: int) -> bool:
        """Submit text ``n``: True once acknowledged (it counts), False when refused, as a client
        sees a Redis node going or coming back (retried: a cast's id is its content's)."""
        nonlocal refused
        try:
            acknowledged.append(await submit(store, text(n)))
            return True
        except (RedisError, NotReplicated, OSError):
            refused += 1
            await asyncio.sleep(0.1)
            return False

    try:
        cfg = config("cluster-worker", wait_replicas=1, wait_timeout_ms=1000, lease_s=3.0)
        worker = Worker(cfg, redis, StandIn(GPU_RTF))
        async with running(worker):
            for n in range(100, 108):
                acknowledged.append(await submit(store, text(n)))
            redis_cluster.kill(victim)
            # submits go on through the failover, however long this machine takes to elect a new
            # master; only answered ones count. They stop once the failover is done and two more
            # were answered after the kill (so some went through the failover's far side).
            n = 108
            while not (len(acknowledged) >= 10 and redis_cluster.failed_over(victim)):
                assert n < 500, f"no failover after {n - 108} submits ({refused} refused)"
                await answered(n)
                n += 1
            # as an orchestrator would: the dead node comes back, as the new master's replica; while
            # it rejoins, a connection may close under a submit: refused, and the client retries
            redis_cluster.restart(victim)
            redis_cluster.wait_ready()
            for n in range(1000, 1006):
                tries = 0
                while not await answered(n):
                    tries += 1
                    assert tries < 100, f"submit {n} refused {tries} times after the old master came back"
            for cast_id in acknowledged:
                entries = await terminal(store, cast_id, 90)
                assert isinstance(entries[-1].record, Eos), cast_id
                assert [e.seq_num for e in entries] == list(range(len(entries)))  # a consistent log
        assert len(acknowledged) >= 16  # 8 before the kill, 2 or more through it, 6 after
    finally:
        await redis.aclose()
        if not victim.alive():
            redis_cluster.restart(victim)
        redis_cluster.wait_ready()


async def test_open_casts_in_several_lanes_are_spoken_as_their_text_comes(redis_cluster: Cluster) -> None:
    redis_cluster.flushall()
    redis = await connect(redis_cluster.url)
    store, live = CastStore(redis), castlog.LiveStore(redis)
    try:
        async with running(Worker(config("cluster-live"), redis, StandIn(GPU_RTF))):
            meta = castlog.Meta(title="live", voice="af_heart", chars=0, sentences=0, created_at=0, live=True)
            ids = [(await live.open("af_heart", meta)).cast_id for _ in range(4)]
            assert len({castlog.keys.lane_of(c) for c in ids}) > 1  # the feed reads several lanes
            for cast_id in ids:
                said = "Hello there. Said on a cluster."
                answer, _ = await live.append_text(cast_id, 0, len(said), said, max_chars=1000)
                assert answer == "ok"
            for cast_id in ids:
                assert (await live.close_text(cast_id, "af_heart"))[0] == "ok"
            for cast_id in ids:
                entries = await terminal(store, cast_id, 60)
                assert isinstance(entries[-1].record, Eos)
                assert [e.record.t for e in entries if isinstance(e.record, castlog.Audio)] == [
                    "Hello there.", "Said on a cluster."]
    finally:
        await redis.aclose()


def lane_reads(redis_cluster: Cluster, command: str = "xreadgroup") -> int:
    """``command`` (XREADGROUP) calls served by the masters so far (INFO commandstats)."""
    calls = 0
    for node in redis_cluster.masters():
        for line in redis_cluster.cli(node.port, "INFO", "commandstats").splitlines():
            if line.startswith(f"cmdstat_{command}:"):
                calls += int(line.split("calls=")[1].split(",")[0])
    return calls


@pytest.mark.rule("tail-per-slot")
async def test_idle_open_casts_in_several_lanes_are_not_polled(redis_cluster: Cluster) -> None:
    """The worker's one stream loop reads per slot, each read blocking SYNTH_POLL_S: open casts
    waiting for text cost no short XREAD per lane, and a fragment, or a cast admitted while the
    reads block (it wakes them through the loop's wake stream), is heard at once."""
    redis_cluster.flushall()
    redis = await connect(redis_cluster.url)
    store, live = CastStore(redis), castlog.LiveStore(redis)
    meta = castlog.Meta(title="live", voice="af_heart", chars=0, sentences=0, created_at=0, live=True)
    try:
        async with running(Worker(config("cluster-live-idle", poll_s=30.0), redis, StandIn(GPU_RTF))):
            ids = [(await live.open("af_heart", meta)).cast_id for _ in range(4)]
            assert len({castlog.keys.lane_of(c) for c in ids}) > 1
            for cast_id in ids:  # each admitted while the others' reads block
                said = "Hello there."
                assert (await live.append_text(cast_id, 0, len(said), said, max_chars=1000, flush=True))[0] == "ok"
                await wait_until(lambda c=cast_id: has_audio(store, c, 1), 10)  # type: ignore[misc]
            before = lane_reads(redis_cluster, "xread")
            await asyncio.sleep(2)
            idle = lane_reads(redis_cluster, "xread") - before
            assert idle <= 2, idle  # a 50 ms XREAD per lane made 68 here
            for cast_id in ids:
                said = " Said later."
                assert (await live.append_text(cast_id, 12, len(said), said, max_chars=1000, flush=True))[0] == "ok"
                await wait_until(lambda c=cast_id: has_audio(store, c, 2), 10)  # type: ignore[misc]
                assert (await live.close_text(cast_id, "af_heart"))[0] == "ok"
                assert isinstance((await terminal(store, cast_id, 60))[-1].record, Eos)
    finally:
        await redis.aclose()


@pytest.mark.rule("one-slot-per-step")
async def test_an_idle_worker_does_not_poll_every_lane(redis_cluster: Cluster) -> None:
    """No read blocks across key lanes on a cluster: the mover waits on the bell that a submit
    rings, not on a sweep of the 128 lane streams many times a second."""
    redis_cluster.flushall()
    redis = await connect(redis_cluster.url)
    store = CastStore(redis)
    try:
        async with running(Worker(config("cluster-idle", lease_s=60.0), redis, StandIn(GPU_RTF))):
            first = await submit(store, text(200))  # its move shows the first full sweep is done
            assert isinstance((await terminal(store, first, 60))[-1].record, Eos)
            before = lane_reads(redis_cluster)
            await asyncio.sleep(2)
            idle = lane_reads(redis_cluster) - before
            assert idle < 2 * castlog.keys.LANES * 2, idle  # a sweep every 50 ms would be thousands
            second = await submit(store, text(201))  # and a bell still brings a job at once
            assert isinstance((await terminal(store, second, 60))[-1].record, Eos)
    finally:
        await redis.aclose()
