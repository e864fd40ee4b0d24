"""Benchmark: what Redis sends for many readers of one cast, as a multiple of the log's bytes.

Bytes, not times: Redis's own counter (INFO stats ``total_net_output_bytes``) before and after
each scenario, divided by the log's bytes as XRANGE sends them. Scenarios, each on a fresh cast
with ``--body-bytes`` bodies (about a real sentence's MP3):

  late joiners   ``--joiners`` SSE listeners join a cast being made at seq 0 (40 records
                 written), then 20 more records and its eos are appended while they catch up
  MP3 joiners    as many ``/audio.mp3`` readers of a cast being made
  status reads   ``--status-reads`` ``GET /api/casts/{id}`` (2 records appended half-way) and
                 one ``/captions``

``python -m edge`` runs in its own process against a redis-server started here; with
``--base DIR`` the same scenarios run against ``python -m edge`` from another checkout (say,
main) too, side by side in one run. Targets (#22): late joiners <= 1.5, status reads <= 0.05.
Writes bench/results/bytes.json.

    .venv/bin/python bench/bench_bytes.py [--joiners 50] [--status-reads 20] [--base OTHER_CHECKOUT]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
from redis.asyncio import Redis

from castlog import Audio, CastStore, Eos, Meta, Start, cast_key
from streamtts.redisserver import free_port

from common import REPO, arguments, machine, print_rows, print_target, temp_redis, wait_healthy, write_results

FIRST, MORE = 40, 20  # records written before the joiners come, and while they catch up
MS = 300


def spawn(impl: str, port: int, redis_url: str, base: Path | None) -> subprocess.Popen[bytes]:
    env = dict(os.environ, REDIS_URL=redis_url, EDGE_HOST="127.0.0.1", EDGE_PORT=str(port),
               EDGE_MAX_STREAMS_PER_CLIENT="100000", EDGE_READ_RATE="100000", EDGE_READ_BURST="1000000",
               EDGE_LOG_LEVEL="WARNING", EDGE_STREAM_LEASE_S="3600")
    if impl == "base" and base is not None:  # its packages first: they shadow this checkout's
        env["PYTHONPATH"] = os.pathsep.join([str(base / "libs"), str(base / "services"), env.get("PYTHONPATH", "")])
    return subprocess.Popen([sys.executable, "-m", "edge"], env=env, stdin=subprocess.DEVNULL)


class Cast:
    def __init__(self, store: CastStore, cast_id: str, body_bytes: int) -> None:
        self.store, self.id, self.body_bytes, self.tail, self.i = store, cast_id, body_bytes, 0, 0

    async def append(self, *records: Any) -> None:
        self.tail = await self.store.append(self.id, self.tail, list(records))

    def audio(self) -> Audio:
        self.i += 1
        return Audio(i=self.i - 1, t=f"Sentence {self.i}.", d=MS, o=(self.i - 1) * MS, body=bytes([self.i % 251]) * self.body_bytes)

    @classmethod
    async def begin(cls, store: CastStore, cast_id: str, body_bytes: int) -> Cast:
        cast = cls(store, cast_id, body_bytes)
        await cast.append(Meta(title="bytes", voice="af_heart", chars=1, sentences=FIRST + MORE, created_at=0))
        await cast.append(Start(attempt=1, resume_from=0, at=0), *(cast.audio() for _ in range(FIRST)))
        return cast

    async def finish(self) -> None:
        for _ in range(MORE):
            await self.append(self.audio())
            await asyncio.sleep(0.005)
        await self.append(Eos(sentences=self.i, audio_ms=self.i * MS, attempts=1))


async def sent(redis: Redis) -> int:
    return int((await redis.info("stats"))["total_net_output_bytes"])


async def log_bytes(redis: Redis, cast_id: str) -> int:
    return sum(len(i) + sum(len(k) + len(v) for k, v in f.items()) for i, f in await redis.xrange(cast_key(cast_id)))


async def drain(http: aiohttp.ClientSession, url: str) -> int:
    async with http.get(url) as resp:
        resp.raise_for_status()
        return len(await resp.read())


async def joiners(http: aiohttp.ClientSession, base_url: str, store: CastStore, cast_id: str, path: str,
                  n: int, body_bytes: int) -> float:
    cast = await Cast.begin(store, cast_id, body_bytes)
    before = await sent(store.redis)
    reads = [asyncio.create_task(drain(http, f"{base_url}/api/casts/{cast_id}/{path}")) for _ in range(n)]
    await asyncio.sleep(0.2)  # they have joined
    await cast.finish()
    await asyncio.gather(*reads)
    return (await sent(store.redis) - before) / await log_bytes(store.redis, cast_id)


async def status_reads(http: aiohttp.ClientSession, base_url: str, store: CastStore, cast_id: str, n: int,
                       body_bytes: int) -> float:
    cast = await Cast.begin(store, cast_id, body_bytes)
    before = await sent(store.redis)
    for k in range(n):
        if k == n // 2:
            await cast.append(cast.audio(), cast.audio())
        await drain(http, f"{base_url}/api/casts/{cast_id}")
    await drain(http, f"{base_url}/api/casts/{cast_id}/captions")
    return (await sent(store.redis) - before) / await log_bytes(store.redis, cast_id)


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    impls = ("edge", "base") if args.base else ("edge",)
    out: dict[str, dict[str, float]] = {}
    with temp_redis() as server:
        redis = Redis.from_url(server.url)
        store = CastStore(redis)
        timeout = aiohttp.ClientTimeout(total=300)
        async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as http:
            for impl in impls:
                port = free_port()
                proc = spawn(impl, port, server.url, args.base)
                try:
                    await wait_healthy(f"http://127.0.0.1:{port}/readyz", proc)
                    url = f"http://127.0.0.1:{port}"
                    tag = impl[0] * 6
                    out[impl] = {
                        "late joiners (SSE)": await joiners(http, url, store, f"{tag}sse001", "events", args.joiners, args.body_bytes),
                        "late joiners (MP3)": await joiners(http, url, store, f"{tag}mp3001", "audio.mp3", args.joiners, args.body_bytes),
                        "status reads": await status_reads(http, url, store, f"{tag}sta001", args.status_reads, args.body_bytes),
                    }
                finally:
                    proc.terminate()
                    proc.wait(30)
        await redis.aclose()
    return out


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--joiners", type=int, default=50)
    parser.add_argument("--status-reads", type=int, default=20)
    parser.add_argument("--body-bytes", type=int, default=30_000)
    parser.add_argument("--base", type=Path, help="also run python -m edge from another checkout (say, main)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "bytes.json")
    args = parser.parse_args()
    out = asyncio.run(bench(args))
    for impl, rows in out.items():
        print(f"\n{impl}: Redis output bytes / log bytes")
        print_rows(rows, 22, "{:.3f}")
    edge = out["edge"]
    print_target("late joiners <= 1.5x the log", edge["late joiners (SSE)"] <= 1.5)
    print_target("status reads <= 0.05x the log", edge["status reads"] <= 0.05)
    write_results(args.out, {"benchmark": "bytes", "machine": machine(), "joiners": args.joiners,
                             "status_reads": args.status_reads, "body_bytes": args.body_bytes, "ratios": out,
                             **({"base": str(args.base)} if args.base else {})})


if __name__ == "__main__":
    main()
