"""Redis Cluster vs one Redis: what 3 masters buy and what the shared tail's reads cost there.

    python bench/bench_cluster.py [--seconds 3] [--listeners 40,400,2000]

On loopback it starts one Redis, then a Redis Cluster of 3 masters (no replicas: the masters are
what is compared), both with the AOF at everysec, and runs the same code against each:

- lane submits/s: the same SUBMIT script with its keys tagged with one of 64 lanes, one call at a
  time per submitter (unbatched on both): what a submit costs Redis with a lane key layout;
- submits/s: concurrent submitters through CastStore (intake's write path). The submit script
  touches the cast's log, its catalog entry and a job stream in one step, so on a cluster it needs
  the lane key layout (castlog/keys.py) and a cluster-ready submit batch; in a tree without them
  the cluster's figure is reported as not measured, never as zero;
- appends/s: concurrent writers appending audio records to many casts: a worker with the model
  replaced by a stand-in at GPU speed or faster (no wait between chunks), so Redis is the only cost;
- Redis commands per record and blocked connections per edge as listeners grow: one process's
  shared tail (castlog.Tail; one read per hash slot on a cluster) follows CASTS_FOLLOWED casts
  while records are appended. The commands the readers send (READER_COMMANDS) are counted by INFO
  commandstats on every master, blocked connections by INFO clients (peak while appending).

It prints the ratios (3 masters / 1 Redis) and writes bench/results/cluster.json. On a shared
2-core machine the 3 masters share the same cores: the ratio there is a floor, not what three
machines give (docs/scale.md turns the per-command costs into a capacity model).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisClusterException, ResponseError

import castlog
from castlog import Audio, CastStore, Eos, Listener, LogReader, Meta, Start, Tail, encode_headers, scripts
from servicekit import connect
from servicekit.connect import is_cluster
from streamtts.rediscluster import start_cluster

from common import RESULTS, arguments, machine, print_rows, temp_redis, write_results

VOICE = "af_heart"
SUBMITTERS = 64
WRITERS = 32
CASTS_FOLLOWED = 40
RECORDS_PER_CAST = 20
BODY = bytes(2_000)  # a short chunk's MP3 bytes
MASTERS = 3
LANES = 64  # lane-tagged submits: as many hash tags as the lane layout has lanes
TAIL_BLOCK_MS = 5_000
TAIL_SOCKET_TIMEOUT_S = 6.0


class Counts:
    """The tail's metrics (castlog.TailMetrics): the reads it issued."""

    def __init__(self) -> None:
        self.reads = 0

    def count_read(self) -> None:
        self.reads += 1

    def count_demoted(self, listeners: int) -> None:
        pass

    def count_rewind(self) -> None:
        pass

    def count_listeners(self, kind: str, delta: int) -> None:
        pass


def meta(n: int) -> Meta:
    return Meta(title="bench", voice=VOICE, chars=40, sentences=n, created_at=0)


async def node_stat(nodes: list[Redis], section: str, pick: Any) -> int:
    total = 0
    for node in nodes:
        total += pick(await node.info(section))
    return total


# What a reader sends (a script's own inner calls, and the writers' appends, are not counted).
# XREVRANGE is left out: the append script calls it (a script's inner calls count in commandstats).
READER_COMMANDS = ("xread", "xrange", "evalsha_ro", "eval_ro", "client|unblock", "client|id")
JOIN_WAIT_S = 120.0  # every listener read its backlog and joined the tail before the count


def calls(stats: dict[str, Any]) -> int:
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in READER_COMMANDS)


async def open_log(store: CastStore, cast_id: str, records: int) -> int:
    """A cast log as a worker finds and starts it (``meta``, ``start``): one slot's writes only."""
    await store.append(cast_id, 0, [meta(records)])
    return await store.append(cast_id, 1, [Start(attempt=1, resume_from=0, at=0)])


async def submits_per_s(redis: Redis, seconds: float) -> float | None:
    store = CastStore(redis)
    done, stop = 0, time.perf_counter() + seconds
    counter = iter(range(10**9))

    async def submitter() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            text = f"bench cast {next(counter)} {time.perf_counter_ns()}"
            await store.submit(castlog.content_id(text, VOICE), text, VOICE, meta(1))
            done += 1

    started = time.perf_counter()
    try:
        await asyncio.gather(*(submitter() for _ in range(SUBMITTERS)))
    except (ResponseError, RedisClusterException) as exc:
        if not isinstance(exc, RedisClusterException) and "CROSSSLOT" not in str(exc):
            raise
        return None  # the submit path is not cluster-ready in this tree (no lanes): not measured
    return done / (time.perf_counter() - started)


async def lane_submits_per_s(redis: Redis, seconds: float) -> float:
    """The SUBMIT script (recipe, meta and job, one atomic step) with its three keys tagged with
    one of LANES lanes, one call at a time per submitter: what a submit costs with a lane key
    layout, on one Redis and on a cluster alike (no batching, which a cluster pipeline refuses)."""
    submit = redis.register_script(scripts.SUBMIT)
    headers = encode_headers(meta(1))
    done, stop = 0, time.perf_counter() + seconds
    counter = iter(range(10**9))

    async def submitter() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            n = next(counter)
            cast_id = castlog.content_id(f"lane cast {n} {time.perf_counter_ns()}", VOICE)
            tag = f"{{l{n % LANES}}}"
            keys = [f"bench/{tag}/log/{cast_id}", f"bench/{tag}/catalog/{cast_id}", f"bench/{tag}/jobs"]
            assert await submit(keys=keys, args=[cast_id, VOICE, "x", "bench", headers]) == b"new"
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(submitter() for _ in range(SUBMITTERS)))
    return done / (time.perf_counter() - started)


async def appends_per_s(redis: Redis, seconds: float) -> float:
    store = CastStore(redis)
    done, stop = 0, time.perf_counter() + seconds

    async def writer(w: int) -> None:
        nonlocal done
        n = 0
        while time.perf_counter() < stop:
            cast_id = castlog.content_id(f"appends {w} {n} {time.perf_counter_ns()}", VOICE)
            n += 1
            tail = await open_log(store, cast_id, RECORDS_PER_CAST)
            for i in range(RECORDS_PER_CAST):
                tail = await store.append(cast_id, tail, [Audio(i=i, t="s", d=300, o=300 * i, body=BODY)])
                done += 1

    started = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(WRITERS)))
    return done / (time.perf_counter() - started)


async def drain(listener: Listener) -> int:
    got = 0
    while not listener.done:
        if await listener.next(30) is None:
            break
        got += 1
    return got


async def follow(redis: Redis, url: str, nodes: list[Redis], listeners: int) -> dict[str, float]:
    """Listeners spread over CASTS_FOLLOWED casts, all following to eos while records are appended."""
    store = CastStore(redis)
    stamp = time.perf_counter_ns()
    casts = [castlog.content_id(f"followed {k} {stamp}", VOICE) for k in range(CASTS_FOLLOWED)]
    tails = {cast_id: await open_log(store, cast_id, RECORDS_PER_CAST) for cast_id in casts}
    conn = Redis.from_url(url, single_connection_client=True, socket_timeout=TAIL_SOCKET_TIMEOUT_S)
    tail = Tail(conn, redis, Counts(), block_ms=TAIL_BLOCK_MS, batch=256, queue_size=4096, reader=LogReader(redis))
    tail.start()
    blocked_before = await node_stat(nodes, "clients", lambda i: int(i["blocked_clients"]))
    peak = 0
    try:
        async with AsyncExitStack() as stack:
            subs = [await stack.enter_async_context(tail.listen(casts[i % CASTS_FOLLOWED], 0, "sse"))
                    for i in range(listeners)]
            readers = [asyncio.ensure_future(drain(s)) for s in subs]
            deadline = time.monotonic() + JOIN_WAIT_S
            while not all(s.subscribed for s in subs) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)  # catching up by offset is not the tail's cost per record
            before = await node_stat(nodes, "commandstats", calls)
            for i in range(RECORDS_PER_CAST):
                for cast_id in casts:
                    tails[cast_id] = await store.append(
                        cast_id, tails[cast_id], [Audio(i=i, t="s", d=300, o=300 * i, body=BODY)])
                blocked = await node_stat(nodes, "clients", lambda i: int(i["blocked_clients"]))
                peak = max(peak, blocked - blocked_before)
                await asyncio.sleep(0.01)
            for cast_id in casts:
                await store.append(cast_id, tails[cast_id], [Eos(sentences=RECORDS_PER_CAST, audio_ms=1, attempts=1)])
            await asyncio.gather(*readers)
            after = await node_stat(nodes, "commandstats", calls)
    finally:
        await tail.stop()
        await conn.aclose()
    records = CASTS_FOLLOWED * (RECORDS_PER_CAST + 1)
    slots = len({redis.keyslot(castlog.cast_key(c)) for c in casts}) if is_cluster(redis) else 1
    return {"commands_per_record": (after - before) / records,
            "blocked_connections": float(peak), "slots_watched": float(slots)}


async def measure(url: str, nodes: list[Redis], seconds: float, listener_counts: list[int]) -> dict[str, Any]:
    redis = await connect(url)
    try:
        out: dict[str, Any] = {
            "submits_per_s": await submits_per_s(redis, seconds),
            "lane_submits_per_s": await lane_submits_per_s(redis, seconds),
            "appends_per_s": await appends_per_s(redis, seconds),
        }
        for n in listener_counts:
            out[f"listeners_{n}"] = await follow(redis, url, nodes, n)
        return out
    finally:
        await redis.aclose()


async def run(seconds: float, listener_counts: list[int]) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "casts_followed": CASTS_FOLLOWED}
    with temp_redis(aof=True, appendfsync="everysec") as server:
        node = Redis.from_url(server.url)
        results["single"] = await measure(server.url, [node], seconds, listener_counts)
        await node.aclose()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = start_cluster(Path(tmp), masters=MASTERS, replicas=0)
        try:
            nodes = [Redis(host="127.0.0.1", port=n.port) for n in cluster.masters()]
            results["cluster"] = await measure(cluster.url, nodes, seconds, listener_counts)
            for node in nodes:
                await node.aclose()
        finally:
            cluster.stop()
    return results


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="each throughput run's length")
    parser.add_argument("--listeners", default="40,400,2000", help="listener counts for the read path (over CASTS_FOLLOWED casts)")
    args = parser.parse_args()
    results = asyncio.run(run(args.seconds, [int(n) for n in args.listeners.split(",")]))
    single, cluster = results["single"], results["cluster"]
    rows: dict[str, object] = {}
    for what in ("submits_per_s", "lane_submits_per_s", "appends_per_s"):
        rows[f"{what} 1 Redis"] = single[what]
        rows[f"{what} {MASTERS} masters"] = cluster[what] if cluster[what] is not None else "not measured (submit not cluster-ready)"
        if cluster[what] is not None:
            rows[f"{what} ratio"] = cluster[what] / single[what]
    for key in (k for k in single if k.startswith("listeners_")):
        for what in ("commands_per_record", "blocked_connections", "slots_watched"):
            rows[f"{key} {what} 1 Redis"] = single[key][what]
            rows[f"{key} {what} {MASTERS} masters"] = cluster[key][what]
    names = [f"listeners_{n}" for n in args.listeners.split(",")]
    first, last = names[0], names[-1]
    for where in ("single", "cluster"):
        rows[f"commands_per_record {last}/{first} {where}"] = (
            results[where][last]["commands_per_record"] / results[where][first]["commands_per_record"])
    print_rows(rows, 56)
    write_results(RESULTS / "cluster.json", results)


if __name__ == "__main__":
    main()
