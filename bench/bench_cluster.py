"""Redis Cluster vs one Redis: what 3 masters buy, and what the key lanes and the shared tail cost.

    python bench/bench_cluster.py [--seconds 3] [--listeners 40,400,2000] [--jobs 2000]

On loopback it starts one Redis, then a Redis Cluster of 3 masters (no replicas: the masters are
what is compared), both with the AOF at everysec, and runs the same code against each, one after
the other in one run:

- submits/s: 64 concurrent submitters through the real CastStore.submit (intake's write path):
  the client's token taken first in its own step (a RateLimiter bucket per submitter, never
  empty here), then claim + catalog + job in one script in the cast's key lane (batched by
  ScriptBatcher, a cluster pipeline on a cluster), then on a cluster the ring of jobs/bell;
  also without the rate limit step, to show that step's share;
- appends/s: concurrent writers appending audio records to many casts: a worker with the model
  replaced by a stand-in at GPU speed or faster (no wait between chunks), so Redis is the only cost;
- Redis commands per record and blocked connections per edge process as listeners grow: one
  process's shared tail (fanout.Tail, woken by wake streams as edge's is; one read per hash slot
  with watched casts on a cluster, so at most the 64 key lanes) follows the casts its listeners
  watch (listener i watches cast i mod CASTS) while records are appended to all CASTS casts. The
  commands the reader sends are counted by INFO commandstats on every master (READER_COMMANDS,
  plus the wake streams' XADDs: every XADD less the appended records'), blocked connections by
  INFO clients (peak while appending);
- the LaneMover's cost: commands per job moved from the key lanes into ``jobs`` (every command
  the mover sends, by INFO commandstats), for a burst (``--jobs`` submitted, then moved) and a
  trickle (one job submitted and moved at a time, the worst case), the bell's XADDs per submit
  on a cluster, and the commands of one sweep of the pending entries (every refresh_s).

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
from rediscluster import start_cluster

import castlog
from castlog import Audio, CastStore, Eos, LogReader, Meta, RateLimiter, Start
from castlog.keys import INTAKE_SCOPE, JOBS_BELL
from castlog.lanes import LaneMover
from fanout import Listener, Tail
from servicekit import connect
from servicekit.connect import is_cluster

from common import RESULTS, arguments, machine, print_rows, temp_redis, write_results

VOICE = "af_heart"
SUBMITTERS = 64
WRITERS = 32
CASTS = 200  # more casts than key lanes: the tail's reads on a cluster stop growing at 64
RECORDS_PER_CAST = 20
BODY = bytes(2_000)  # a short chunk's MP3 bytes
MASTERS = 3
TAIL_BLOCK_MS = 5_000
TAIL_SOCKET_TIMEOUT_S = 6.0
WAKE_NAME = "edge"  # woken as edge's tail is: by its own wake streams, not CLIENT UNBLOCK
# A bucket per submitter that never runs dry: the rate limit step's cost, not its refusals.
LIMIT_RATE, LIMIT_BURST = 1e9, 10**9
MOVER_BLOCK_MS = 100  # a sweep's wait for a job (synth: SYNTH_POLL_S)
MOVER_LEASE_MS = 30_000
TRICKLE_JOBS = 200


class Counts:
    """The tail's metrics (fanout.TailMetrics): the reads it issued."""

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
# XREVRANGE is left out: the append script calls it (a script's inner calls count in commandstats);
# so is XADD, which the append script calls once per record: the wake streams' XADDs are the XADDs
# beyond the records appended (wake_xadds).
READER_COMMANDS = ("xread", "xrange", "evalsha_ro", "eval_ro", "pexpire")
JOIN_WAIT_S = 120.0  # every listener read its backlog and joined the tail before the count


def calls(stats: dict[str, Any], names: tuple[str, ...] | None = None) -> int:
    """Calls of ``names`` (None: every command but INFO, which the count itself sends)."""
    if names is None:
        return sum(int(v.get("calls", 0)) for k, v in stats.items() if k != "cmdstat_info")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in names)


async def reader_calls(nodes: list[Redis]) -> tuple[int, int]:
    """(READER_COMMANDS' calls, XADD calls) over every master."""
    reads = await node_stat(nodes, "commandstats", lambda s: calls(s, READER_COMMANDS))
    xadds = await node_stat(nodes, "commandstats", lambda s: calls(s, ("xadd",)))
    return reads, xadds


async def all_calls(nodes: list[Redis]) -> int:
    return await node_stat(nodes, "commandstats", lambda s: calls(s, None))


async def open_log(store: CastStore, cast_id: str, records: int) -> int:
    """A cast log as a worker finds and starts it (``meta``, ``start``): one slot's writes only."""
    await store.append(cast_id, 0, [meta(records)])
    return await store.append(cast_id, 1, [Start(attempt=1, resume_from=0, at=0)])


async def submits_per_s(redis: Redis, seconds: float, *, limited: bool) -> float:
    """Concurrent submitters through CastStore.submit; ``limited``: each takes its client's
    token first (the rate limit's own step, as intake does)."""
    store = CastStore(redis)
    limiter = RateLimiter(redis, INTAKE_SCOPE, LIMIT_RATE, LIMIT_BURST)
    done, stop = 0, time.perf_counter() + seconds
    counter = iter(range(10**9))

    async def submitter(s: int) -> None:
        nonlocal done
        limit = (limiter, f"bench-client-{s}") if limited else None
        while time.perf_counter() < stop:
            text = f"bench cast {next(counter)} {time.perf_counter_ns()}"
            assert await store.submit(castlog.content_id(text, VOICE), text, VOICE, meta(1), limit=limit) == "new"
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(submitter(s) for s in range(SUBMITTERS)))
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
    """Listeners spread over the casts (listener i on cast i mod CASTS), all following to eos
    while records are appended to every cast."""
    store = CastStore(redis)
    stamp = time.perf_counter_ns()
    casts = [castlog.content_id(f"followed {k} {stamp}", VOICE) for k in range(CASTS)]
    watched = casts[: min(listeners, CASTS)]
    tails = {cast_id: await open_log(store, cast_id, RECORDS_PER_CAST) for cast_id in casts}
    conn = Redis.from_url(url, single_connection_client=True, socket_timeout=TAIL_SOCKET_TIMEOUT_S)
    tail = Tail(conn, redis, Counts(), block_ms=TAIL_BLOCK_MS, batch=256, queue_size=4096,
                reader=LogReader(redis), wake=WAKE_NAME)
    tail.start()
    blocked_before = await node_stat(nodes, "clients", lambda i: int(i["blocked_clients"]))
    peak = 0
    try:
        async with AsyncExitStack() as stack:
            subs = [await stack.enter_async_context(tail.listen(casts[i % CASTS], 0, "sse"))
                    for i in range(listeners)]
            readers = [asyncio.ensure_future(drain(s)) for s in subs]
            deadline = time.monotonic() + JOIN_WAIT_S
            while not all(s.subscribed for s in subs) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)  # catching up by offset is not the tail's cost per record
            reads_before, xadds_before = await reader_calls(nodes)
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
            reads_after, xadds_after = await reader_calls(nodes)
    finally:
        await tail.stop()
        await conn.aclose()
    appended = CASTS * (RECORDS_PER_CAST + 1)
    wake_xadds = (xadds_after - xadds_before) - appended  # the append script: one XADD per record
    followed = len(watched) * (RECORDS_PER_CAST + 1)  # the records the tail had to read
    slots = len({redis.keyslot(castlog.cast_key(c)) for c in watched}) if is_cluster(redis) else 1
    return {"casts_watched": float(len(watched)),
            "commands_per_record": (reads_after - reads_before + wake_xadds) / followed,
            "blocked_connections": float(peak), "slots_watched": float(slots)}


async def flush(nodes: list[Redis]) -> None:
    """Every master emptied (scripts stay loaded): the mover finds only the jobs submitted for it."""
    for node in nodes:
        await node.flushall()


async def move_all(mover: LaneMover, jobs: int, *, drain: bool) -> None:
    """Sweeps until ``jobs`` moved; ``drain``: then until a sweep waited its whole block, every
    bell read (a burst leaves bells behind that name lanes already emptied: their reads count)."""
    moved = 0
    while moved < jobs:
        moved += await mover.sweep(MOVER_BLOCK_MS)
    while drain:
        started = time.perf_counter()
        if not await mover.sweep(MOVER_BLOCK_MS) and time.perf_counter() - started >= MOVER_BLOCK_MS / 1000 * 0.9:
            return


async def mover_cost(redis: Redis, nodes: list[Redis], jobs: int) -> dict[str, float]:
    """Commands per job the LaneMover moves from the key lanes into ``jobs``: a burst of ``jobs``
    submits moved after they all stand, then a trickle of TRICKLE_JOBS moved one by one."""
    await flush(nodes)
    store = CastStore(redis)
    mover = LaneMover(redis, "bench-mover", lease_ms=MOVER_LEASE_MS, single_redis=not is_cluster(redis))
    await mover.open()
    counter = iter(range(10**9))

    async def submit() -> None:
        text = f"moved cast {next(counter)} {time.perf_counter_ns()}"
        answer = await store.submit(castlog.content_id(text, VOICE), text, VOICE, meta(1))
        assert answer == "new", answer

    async def submitter(count: int) -> None:
        for _ in range(count):
            await submit()

    await asyncio.gather(*(submitter(jobs // SUBMITTERS + (s < jobs % SUBMITTERS)) for s in range(SUBMITTERS)))
    bells = int((await redis.xinfo_stream(JOBS_BELL))["entries-added"]) if is_cluster(redis) else 0
    before = await all_calls(nodes)
    await move_all(mover, jobs, drain=True)
    burst = (await all_calls(nodes) - before) / jobs
    trickle_calls = 0
    for _ in range(TRICKLE_JOBS):
        await submit()
        before = await all_calls(nodes)
        await move_all(mover, 1, drain=False)
        trickle_calls += await all_calls(nodes) - before
    before = await all_calls(nodes)
    await mover.sweep(MOVER_BLOCK_MS, pending=True)  # nothing pending: the sweep's fixed cost
    pending_sweep = await all_calls(nodes) - before
    assert await redis.xlen(castlog.JOBS) == jobs + TRICKLE_JOBS
    return {"burst_commands_per_job": burst, "trickle_commands_per_job": trickle_calls / TRICKLE_JOBS,
            "bell_xadds_per_submit": bells / jobs, "pending_sweep_commands": float(pending_sweep)}


async def measure(url: str, nodes: list[Redis], seconds: float, listener_counts: list[int], jobs: int) -> dict[str, Any]:
    redis = await connect(url)
    try:
        out: dict[str, Any] = {
            "submits_per_s": await submits_per_s(redis, seconds, limited=True),
            "submits_no_limit_per_s": await submits_per_s(redis, seconds, limited=False),
            "appends_per_s": await appends_per_s(redis, seconds),
        }
        for n in listener_counts:
            out[f"listeners_{n}"] = await follow(redis, url, nodes, n)
        out["mover"] = await mover_cost(redis, nodes, jobs)
        return out
    finally:
        await redis.aclose()


async def run(seconds: float, listener_counts: list[int], jobs: int) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "casts": CASTS, "submitters": SUBMITTERS,
                               "writers": WRITERS, "seconds": seconds, "jobs_moved": jobs}
    with temp_redis(aof=True, appendfsync="everysec") as server:
        node = Redis.from_url(server.url)
        results["single"] = await measure(server.url, [node], seconds, listener_counts, jobs)
        await node.aclose()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = start_cluster(Path(tmp), masters=MASTERS, replicas=0)
        try:
            nodes = [Redis(host="127.0.0.1", port=n.port) for n in cluster.masters()]
            results["cluster"] = await measure(cluster.url, nodes, seconds, listener_counts, jobs)
            for node in nodes:
                await node.aclose()
        finally:
            cluster.stop()
    return results


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="each throughput run's length")
    parser.add_argument("--listeners", default="40,400,2000", help="listener counts for the read path (over CASTS casts)")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs submitted in a burst for the LaneMover to move")
    args = parser.parse_args()
    results = asyncio.run(run(args.seconds, [int(n) for n in args.listeners.split(",")], args.jobs))
    single, cluster = results["single"], results["cluster"]
    rows: dict[str, object] = {}
    for what in ("submits_per_s", "submits_no_limit_per_s", "appends_per_s"):
        rows[f"{what} 1 Redis"] = single[what]
        rows[f"{what} {MASTERS} masters"] = cluster[what]
        rows[f"{what} ratio"] = cluster[what] / single[what]
    names = [f"listeners_{n}" for n in args.listeners.split(",")]
    for key in names:
        for what in ("casts_watched", "commands_per_record", "blocked_connections", "slots_watched"):
            rows[f"{key} {what} 1 Redis"] = single[key][what]
            rows[f"{key} {what} {MASTERS} masters"] = cluster[key][what]
    first, last = names[0], names[-1]
    for where in ("single", "cluster"):
        rows[f"commands_per_record {last}/{first} {where}"] = (
            results[where][last]["commands_per_record"] / results[where][first]["commands_per_record"])
    for what in single["mover"]:
        rows[f"mover {what} 1 Redis"] = single["mover"][what]
        rows[f"mover {what} {MASTERS} masters"] = cluster["mover"][what]
    print_rows(rows, 60)
    write_results(RESULTS / "cluster.json", results)


if __name__ == "__main__":
    main()
