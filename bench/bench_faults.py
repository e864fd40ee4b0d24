"""A seeded, randomized fault campaign against real processes (``docs/deploy.md`` has its table).

Starts a real redis-server (AOF, ``appendfsync everysec``), intake, edge and two synth workers
with the real model (ONNX, one thread each; worker 0 reaches Redis through a TCP proxy of this
tool), submits short texts through intake while an SSE follower per cast follows it through
edge, and meanwhile injects, in a seeded random order with every kind at least once:

  kill9-worker      a worker killed with -9 mid-chunk, started again
  sigterm-worker    a worker stopped with SIGTERM (hands its jobs back), started again
  sigstop-worker    a worker frozen with SIGSTOP past its lease (a zombie), then continued
  partition-worker  worker 0 cut off from Redis (the proxy holds every byte) past its lease
  kill9-edge        edge killed with -9 (followers resume with Last-Event-ID), started again
  kill9-intake      intake killed with -9 (submits retry), started again
  kill9-redis       Redis killed with -9 and restarted on its AOF
  power-loss        Redis killed with -9, the AOF cut back by up to a second, restarted

Then, once every process is back and the work has settled, it checks by reading Redis directly:
every accepted cast terminal (in `error` only for a model failure: none is injected), every
chunk exactly once and in order, nothing after the terminal record, dense seq numbers, no
pending or undelivered job, a receipt for every finished cast, every finished cast's
``/audio.mp3`` complete (Content-Length, bytes) and decodable to the right duration, and every
SSE follower holding exactly the log's records, none received twice. A cast accepted in the last
second before a power loss may be lost with the AOF (``appendfsync everysec``): counted, not a
violation. Prints the seed and a table; exits 1 on any violation.

    .venv/bin/python bench/bench_faults.py [--seed N] [--quick] [--casts N] [--faults N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import ClientError, ClientSession, ClientTimeout

import castlog
from castlog.records import decode_entry
from servicekit import client_for
from streamtts.redisserver import free_port

from faultcheck import Follower, Verdict, check_audio, check_cast, check_follower, check_queue
from faultrig import Proxy, RedisCtl, Service

KINDS = ("kill9-worker", "sigterm-worker", "sigstop-worker", "partition-worker",
         "kill9-edge", "kill9-intake", "kill9-redis", "power-loss")
VOICE = "jf_alpha"  # packaged with the ONNX model; it reads English too
SENTENCES = ("The river runs north.", "Bread is warm today.", "We left at noon.", "Rain fell on the roof.",
             "The map was wrong.", "She sang softly.", "Lights came on in town.", "The dog slept late.")
LEASE_S = 3.0  # the workers' lease: SIGSTOP and partitions last past it
SUBMIT_RETRY_S = 0.3
# Once the work has settled, followers have this long to reach their cast's terminal record.
FOLLOWERS_END_S = 30.0


@dataclass
class Campaign:
    seed: int
    quick: bool
    casts: int
    faults: int
    rng: random.Random = field(init=False)  # the faults: which, in what order, how long
    texts: random.Random = field(init=False)  # the load: its own, so the fault schedule is the seed's alone
    accepted: dict[str, tuple[str, float]] = field(default_factory=dict)  # id -> (text, loop time accepted)
    followers: dict[str, Follower] = field(default_factory=dict)
    injected: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    power_losses: list[float] = field(default_factory=list)  # loop time of each cut, and its window

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.texts = random.Random(-self.seed - 1)

    def fault_order(self) -> list[str]:
        order = list(KINDS)
        self.rng.shuffle(order)
        order += [self.rng.choice(KINDS) for _ in range(max(0, self.faults - len(order)))]
        return order


class Stack:
    """Redis, the proxy, intake, edge and two workers, in a temporary folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.redis = RedisCtl(root / "redis")
        self.proxy = Proxy(self.redis.port)
        ports = {"intake": free_port(), "edge": free_port(), "synth0": free_port(), "synth1": free_port()}
        base = dict(os.environ, LOG_LEVEL="INFO", INTAKE_RATE="1000", INTAKE_BURST="1000", EDGE_READ_RATE="1000",
                    EDGE_READ_BURST="10000", EDGE_MAX_STREAMS_PER_CLIENT="1000", EDGE_TAIL_BLOCK_MS="1000")
        self.intake = Service("intake", "intake", dict(base, REDIS_URL=self.redis.url, INTAKE_PORT=str(ports["intake"])),
                              ports["intake"], root)
        self.edge = Service("edge", "edge", dict(base, REDIS_URL=self.redis.url, EDGE_PORT=str(ports["edge"])),
                            ports["edge"], root)
        self.workers: list[Service] = []
        self._ports = ports
        self._base = base

    async def start(self, http: ClientSession) -> None:
        await self.proxy.start()
        self.redis.start_sampling()
        synth = dict(self._base, SYNTH_BACKEND="onnx", SYNTH_THREADS="1", SYNTH_LEASE_S=str(LEASE_S),
                     SYNTH_GRACE_S="20", SYNTH_POLL_S="0.3", SYNTH_CACHE_DIR=str(self.root / "model-cache"),
                     SYNTH_RETRY_BACKOFF_S="0.5")
        for k, url in enumerate((self.proxy.url, self.redis.url)):
            port = self._ports[f"synth{k}"]
            self.workers.append(Service(f"synth{k}", "synth", dict(synth, REDIS_URL=url, SYNTH_METRICS_PORT=str(port)),
                                        port, self.root))
        for service in (self.intake, self.edge, *self.workers):
            service.start()
        for service in (self.intake, self.edge, *self.workers):
            await service.ready(http)

    async def ready(self, http: ClientSession) -> None:
        for service in (self.intake, self.edge, *self.workers):
            await service.ready(http)

    async def close(self) -> None:
        for service in (self.intake, self.edge, *self.workers):
            await service.stop()
        await self.proxy.close()
        await self.redis.close()


async def inject(kind: str, stack: Stack, c: Campaign, loop_time: Callable[[], float]) -> str:
    """Hurt the stack one way; return a line for the log."""
    rng = c.rng
    worker = rng.choice(stack.workers)
    if kind == "kill9-worker":
        worker.send(signal.SIGKILL)
        await worker.exit()
        await asyncio.sleep(rng.uniform(0.2, 1.5))
        worker.start()
        return f"{worker.name} killed with -9"
    if kind == "sigterm-worker":
        worker.send(signal.SIGTERM)
        code = await worker.exit()
        worker.start()
        return f"{worker.name} stopped with SIGTERM (exit {code})"
    if kind == "sigstop-worker":
        worker.send(signal.SIGSTOP)
        await asyncio.sleep(LEASE_S + rng.uniform(0.5, 2.0))
        worker.send(signal.SIGCONT)
        return f"{worker.name} frozen past its lease"
    if kind == "partition-worker":
        stack.proxy.cut()
        await asyncio.sleep(LEASE_S + rng.uniform(0.5, 2.0))
        stack.proxy.heal()
        return "synth0 cut off from Redis past its lease"
    if kind in ("kill9-edge", "kill9-intake"):
        service = stack.edge if kind == "kill9-edge" else stack.intake
        service.send(signal.SIGKILL)
        await service.exit()
        service.start()
        return f"{service.name} killed with -9"
    if kind == "kill9-redis":
        stack.redis.kill9()
        await asyncio.sleep(rng.uniform(0.3, 1.5))
        stack.redis.restart()
        return "Redis killed with -9"
    cut_back = rng.uniform(0.0, 1.0)
    c.power_losses.append(loop_time() - cut_back - 0.2)
    cut = stack.redis.power_loss(cut_back)
    await asyncio.sleep(rng.uniform(0.3, 1.0))
    stack.redis.restart()
    return f"power loss: Redis killed with -9, the AOF cut back {cut_back:.2f}s ({cut} bytes)"


async def submit(http: ClientSession, intake_url: str, text: str) -> str:
    """POST until intake accepts (it may be down or answering 503 meanwhile)."""
    while True:
        try:
            async with http.post(f"{intake_url}/api/casts", json={"text": text, "voice": VOICE},
                                 timeout=ClientTimeout(total=15)) as resp:
                if resp.status in (200, 201):
                    return str((await resp.json())["id"])
        except (ClientError, OSError, asyncio.TimeoutError):
            pass
        await asyncio.sleep(SUBMIT_RETRY_S)


async def load(http: ClientSession, stack: Stack, c: Campaign, tasks: list[asyncio.Task[None]],
               spread_s: float) -> None:
    intake_url = f"http://127.0.0.1:{stack.intake.port}"
    edge_url = f"http://127.0.0.1:{stack.edge.port}"
    loop = asyncio.get_running_loop()
    for n in range(c.casts):
        picks = c.texts.sample(SENTENCES, c.texts.randint(2, 3))
        text = f"Cast {n} of seed {c.seed}. " + " ".join(picks)
        cast_id = await submit(http, intake_url, text)
        c.accepted[cast_id] = (text, loop.time())
        follower = c.followers[cast_id] = Follower(cast_id)
        tasks.append(asyncio.create_task(follower.follow(http, edge_url)))
        await asyncio.sleep(c.texts.uniform(0, 2 * spread_s / max(1, c.casts)))


async def settle(stack: Stack, c: Campaign, timeout_s: float) -> None:
    """Until every accepted cast ends and no job is pending (or ``timeout_s``)."""
    redis = client_for(stack.redis.url)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ends = [await redis.xrevrange(castlog.cast_key(cid), count=1) for cid in c.accepted]
            done = all(not rows or castlog.is_terminal(decode_entry(*rows[0]).record)  # type: ignore[union-attr]
                       for rows in ends)
            pending = (await redis.xpending(castlog.JOBS, castlog.GROUP))["pending"]
            if done and not pending:
                return
            await asyncio.sleep(0.5)
    finally:
        await redis.aclose()


async def verify(http: ClientSession, stack: Stack, c: Campaign, verdict: Verdict) -> None:
    redis = client_for(stack.redis.url)
    edge_url = f"http://127.0.0.1:{stack.edge.port}"
    finished: set[str] = set()
    last_loss = max(c.power_losses, default=-1.0)
    try:
        for cast_id, (text, accepted_at) in c.accepted.items():
            if not await redis.exists(castlog.cast_key(cast_id)) and any(
                    t <= accepted_at for t in c.power_losses):
                verdict.count("accepted, lost with the AOF's last second")
                continue
            entries = await check_cast(redis, cast_id, text, verdict)
            if entries and entries[-1].kind == "eos":
                finished.add(cast_id)
                await check_audio(http, edge_url, cast_id, entries, verdict)
            follower = c.followers[cast_id]
            if not follower.ended_at:
                verdict.bad(f"{cast_id}: its SSE follower never received the terminal record")
            elif follower.ended_at < last_loss:
                verdict.count("followers done before a later power loss (not compared)")
            elif entries:
                check_follower(follower, entries, verdict)
        await check_queue(redis, finished, verdict)
        verdict.count("casts accepted", len(c.accepted))
        verdict.count("casts finished", len(finished))
    finally:
        await redis.aclose()


async def run(c: Campaign) -> int:
    print(f"fault campaign: seed {c.seed}, {'quick' if c.quick else 'full'} mode, {c.casts} casts", flush=True)
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        stack = Stack(Path(tmp))
        followers: list[asyncio.Task[None]] = []
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with ClientSession() as http:
            try:
                await stack.start(http)
                print(f"  stack up in {loop.time() - started:.0f}s", flush=True)
                order = c.fault_order()
                loader = asyncio.create_task(load(http, stack, c, followers, spread_s=len(order) * 3.0))
                for kind in order:
                    await asyncio.sleep(c.rng.uniform(0.5, 2.5))
                    line = await inject(kind, stack, c, loop.time)
                    c.injected[kind] += 1
                    print(f"  {loop.time() - started:6.1f}s  {line}", flush=True)
                    await stack.ready(http)
                await loader
                await settle(stack, c, timeout_s=120 if c.quick else 300)
                print(f"  {loop.time() - started:6.1f}s  settled; checking", flush=True)
                if followers:  # each ends with its cast's terminal record; a lost cast's never does
                    await asyncio.wait(followers, timeout=FOLLOWERS_END_S)
                verdict = Verdict()
                await verify(http, stack, c, verdict)
            finally:
                for task in followers:
                    task.cancel()
                await stack.close()
    report(c, verdict, loop.time() - started)
    return 1 if verdict.violations else 0


def report(c: Campaign, verdict: Verdict, took_s: float) -> None:
    print(f"\nseed {c.seed} ({'quick' if c.quick else 'full'}), {took_s:.0f}s")
    print("| fault | injected |\n|---|---|")
    for kind in KINDS:
        print(f"| {kind} | {c.injected[kind]} |")
    print("\n| outcome | count |\n|---|---|")
    for what, n in sorted(verdict.counts.items()):
        print(f"| {what} | {n} |")
    print(f"| violations | {len(verdict.violations)} |")
    for line in verdict.violations:
        print(f"VIOLATION {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--quick", action="store_true", help="CI: each fault kind once, few casts")
    parser.add_argument("--casts", type=int, default=None)
    parser.add_argument("--faults", type=int, default=None, help="faults injected (at least one of each kind)")
    args = parser.parse_args(argv)
    casts = args.casts or (5 if args.quick else 16)
    faults = args.faults or (len(KINDS) if args.quick else 2 * len(KINDS))
    return asyncio.run(run(Campaign(args.seed, args.quick, casts, faults)))


if __name__ == "__main__":
    sys.exit(main())
