"""Benchmark: POST /api/casts on intake's real app, side by side with two references, in one run.

  floor       a bare aiohttp handler that does one plain XADD of the body (the least any write costs)
  three_trips intake's app with the original design's write path: the rate limiter's token, then
              claim the catalog, claim the cast, append the job, each a round trip (no atomicity)
  intake      intake's app as shipped: validation, plan, then one script that takes the client's
              token and submits atomically; the scripts of requests in flight at one moment go to
              Redis together, in one pipeline (castlog.batching): at most one round trip each

Each server runs in its own process on a loopback port against one real redis-server (no AOF)
started here; this process drives them with aiohttp clients at 1, 16 and 64 concurrent requests,
with fresh texts (every request a new cast) and with repeats (the same cast again). Cells of the
three servers are interleaved so drift hits all alike. Prints rps, p50, p99, server and Redis CPU
per request, and the ratios; writes bench/results/intake.json.

    .venv/bin/python bench/bench_intake.py [--seconds 1] [--rounds 3] [--out bench/results/intake.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from jobstreams import enqueue
from redis.asyncio import Redis
from redis.exceptions import ResponseError

import castlog
import servicekit
from castlog import CastStore, Meta, RateLimiter, SubmitResult
from castlog.ratelimit import RateLimited
from castlog.records import encode_headers
from intake import Config, create_app
from intake.context import INTAKE
from streamtts.redisserver import free_port

from common import RESULTS, arguments, repo_texts, temp_redis, wait_healthy, write_results

VARIANTS = ("floor", "three_trips", "intake")
MODES = ("fresh", "repeat")
CONCURRENCY = (1, 16, 64)
WARMUP_S = 0.3
READY_TIMEOUT_S = 20.0
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
FLOOR_STREAM = "bench/floor"


# --- the servers (each in its own process) ---------------------------------------------------


class ThreeTripStore(CastStore):
    """The original design's write path: the token, then three round trips, each a claim by
    explicit entry id."""

    async def submit(
        self, cast_id: str, text: str, voice: str, meta: Meta, *, limit: tuple[RateLimiter, str] | None = None
    ) -> SubmitResult:
        if limit is not None:
            verdict = await limit[0].take(limit[1])
            if not verdict.allowed:
                raise RateLimited(verdict)
        r, now = self.redis, int(time.time() * 1000)
        try:
            await r.xadd(
                castlog.catalog_key(cast_id),
                {"text": text, "voice": voice, "title": meta.title, "created_at": now},
                id="0-1",
            )
        except ResponseError:  # the catalog has its entry: somebody claimed this cast before
            return "existing"
        try:
            meta_fields = {"e": b"meta", "h": encode_headers(meta), "ts": now}
            await r.xadd(castlog.cast_key(cast_id), meta_fields, id="0-1")
        except ResponseError:
            return "existing"
        await enqueue(r, castlog.streams.Job(id=cast_id, voice=voice, enqueued_at=now))
        return "new"


def floor_app(redis_url: str) -> web.Application:
    redis_key = web.AppKey("redis", Redis)

    async def post(request: web.Request) -> web.Response:
        await request.app[redis_key].xadd(FLOOR_STREAM, {"b": await request.read()})
        return web.json_response({"ok": True}, status=201)

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def ctx(app: web.Application) -> Any:
        app[redis_key] = await servicekit.connect(redis_url)
        yield
        await app[redis_key].aclose()

    app = web.Application()
    app.cleanup_ctx.append(ctx)
    app.router.add_post("/api/casts", post)
    app.router.add_get("/healthz", health)
    return app


def intake_app(redis_url: str, variant: str) -> web.Application:
    # The rate limiter stays on (one script call per request, as deployed) with a bucket no
    # benchmark empties.
    cfg = Config(redis_url=redis_url, rate=1e9, burst=1_000_000_000)
    app = create_app(cfg)

    async def swap_write_path(app: web.Application) -> None:
        if variant == "three_trips":
            app[INTAKE].store = ThreeTripStore(app[INTAKE].redis)

    app.on_startup.append(swap_write_path)  # runs after the app's cleanup_ctx connected Redis
    return app


def serve(variant: str, port: int, redis_url: str) -> None:
    app = floor_app(redis_url) if variant == "floor" else intake_app(redis_url, variant)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


# --- the load --------------------------------------------------------------------------------


@dataclass
class Sample:
    """One timed run of one server in one cell."""

    latencies: list[float]
    errors: int
    seconds: float
    sent: int  # every request sent, the warm-up's included
    server_cpu_s: float
    redis_cpu_s: float


@dataclass
class Cell:
    variant: str
    mode: str
    concurrency: int
    requests: int
    errors: int
    rps: float  # the median over rounds: one round hit by a neighbour's burst does not decide
    rps_rounds: list[float]
    p50_ms: float
    p99_ms: float
    server_cpu_us_per_req: float
    redis_cpu_us_per_req: float

    @classmethod
    def of(cls, variant: str, mode: str, conc: int, samples: list[Sample]) -> Cell:
        latencies = sorted(x for s in samples for x in s.latencies)
        sent = max(1, sum(s.sent for s in samples))
        rounds = [len(s.latencies) / s.seconds for s in samples]
        return cls(
            variant, mode, conc, len(latencies), sum(s.errors for s in samples),
            statistics.median(rounds), [round(r) for r in rounds],
            percentile(latencies, 0.50) * 1000, percentile(latencies, 0.99) * 1000,
            1e6 * sum(s.server_cpu_s for s in samples) / sent, 1e6 * sum(s.redis_cpu_s for s in samples) / sent,
        )  # fmt: skip


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (Linux /proc); the bench is Linux-only for this."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Bodies:
    """Request bodies: every one a new text (fresh), or always the same one (repeat)."""

    def __init__(self, texts: list[str], mode: str, tag: str) -> None:
        self.texts = [json.dumps(t.strip())[1:-1] for t in texts]
        self.mode, self.tag, self.n = mode, tag, 0

    def next(self) -> bytes:
        self.n += 1
        if self.mode == "repeat":
            return ('{"text": "%s", "voice": "af_heart"}' % self.texts[1]).encode()
        text = self.texts[self.n % len(self.texts)]
        return ('{"text": "%s Take %s-%d.", "voice": "af_heart"}' % (text, self.tag, self.n)).encode()


async def drive(url: str, bodies: Bodies, concurrency: int, seconds: float) -> tuple[list[float], int]:
    """Run ``concurrency`` clients in a loop for a warm-up and then ``seconds``; the latencies
    (s) and errors of the requests started in the timed part."""
    latencies: list[float] = []
    errors = 0
    headers = {"Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        warm_until = time.perf_counter() + WARMUP_S
        end = warm_until + seconds

        async def client() -> None:
            nonlocal errors
            while (now := time.perf_counter()) < end:
                async with session.post(url, data=bodies.next(), headers=headers) as resp:
                    await resp.read()
                    ok = resp.status in (200, 201)
                done = time.perf_counter()
                if now >= warm_until:
                    latencies.append(done - now)
                    errors += not ok

        await asyncio.gather(*(client() for _ in range(concurrency)))
    return latencies, errors


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] if sorted_values else float("nan")


async def run_once(
    port: int, pid: int, redis: Redis, redis_pid: int, bodies: Bodies, conc: int, seconds: float
) -> Sample:
    await redis.flushall()  # every run starts from an empty database: memory stays bounded
    # as a worker does at start-up: intake takes only voices a worker has published
    await castlog.publish_voices(redis, castlog.VoiceList(voices=("af_heart",), default="af_heart"), maxlen=100)
    cpu0, rcpu0 = cpu_seconds(pid), cpu_seconds(redis_pid)
    latencies, errors = await drive(f"http://127.0.0.1:{port}/api/casts", bodies, conc, seconds)
    cpu1, rcpu1 = cpu_seconds(pid), cpu_seconds(redis_pid)
    return Sample(latencies, errors, seconds, bodies.n, cpu1 - cpu0, rcpu1 - rcpu0)


async def bench(seconds: float, rounds: int, out: Path) -> dict[str, Any]:
    texts = list(repo_texts().values())
    with temp_redis() as server:
        procs: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
        redis = Redis.from_url(server.url)
        try:
            for variant in VARIANTS:
                port = free_port()
                cmd = [sys.executable, __file__, "--serve", variant, "--port", str(port), "--redis", server.url]
                procs[variant] = (subprocess.Popen(cmd), port)
            for proc, port in procs.values():
                await wait_healthy(f"http://127.0.0.1:{port}/healthz", proc, READY_TIMEOUT_S)
            samples: dict[tuple[str, str, int], list[Sample]] = {}
            for rnd in range(rounds):
                for mode in MODES:
                    for conc in CONCURRENCY:
                        for variant in VARIANTS:
                            proc, port = procs[variant]
                            bodies = Bodies(texts, mode, f"{variant}{conc}r{rnd}")
                            sample = await run_once(port, proc.pid, redis, server.process.pid, bodies, conc, seconds)
                            samples.setdefault((variant, mode, conc), []).append(sample)
                            rps = len(sample.latencies) / seconds
                            print(f"  round {rnd + 1}/{rounds} {variant:11} {mode:6} c={conc:<3}"
                                  f" {rps:7.0f} rps  errors {sample.errors}", flush=True)  # fmt: skip
            cells = [Cell.of(v, m, c, ss) for (v, m, c), ss in samples.items()]
        finally:
            await redis.aclose()
            for proc, _port in procs.values():
                proc.send_signal(signal.SIGTERM)
            for proc, _port in procs.values():
                proc.wait(10)
    return report(cells, seconds, rounds, out)


def report(cells: list[Cell], seconds: float, rounds: int, out: Path) -> dict[str, Any]:
    by = {(c.variant, c.mode, c.concurrency): c for c in cells}
    ratios = []
    heads = " | ".join(f"{v:>11} rps p50/p99 ms" for v in VARIANTS)
    print(f"\nmode   conc | {heads} | intake/floor rps; server CPU/req | intake/3trips rps")
    for mode in MODES:
        for conc in CONCURRENCY:
            f, t, i = (by[(v, mode, conc)] for v in VARIANTS)
            row = {
                "mode": mode,
                "concurrency": conc,
                "intake_vs_floor_rps": i.rps / f.rps,
                "intake_vs_three_trips_rps": i.rps / t.rps,
                "intake_vs_floor_server_cpu": i.server_cpu_us_per_req / f.server_cpu_us_per_req,
                "intake_vs_three_trips_server_cpu": i.server_cpu_us_per_req / t.server_cpu_us_per_req,
                "intake_vs_three_trips_p50": i.p50_ms / t.p50_ms,
            }
            ratios.append(row)
            cols = " | ".join(f"{c.rps:8.0f} {c.p50_ms:6.2f}/{c.p99_ms:6.2f}".rjust(27) for c in (f, t, i))
            print(f"{mode:6} {conc:4} | {cols} |"
                  f"        {row['intake_vs_floor_rps']:5.2f}x; {row['intake_vs_floor_server_cpu']:5.2f}x"
                  f"         | {row['intake_vs_three_trips_rps']:5.2f}x")  # fmt: skip
    result = {
        "benchmark": "intake",
        "seconds_per_run": seconds,
        "rounds": rounds,
        "warmup_s": WARMUP_S,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "cells": [asdict(c) for c in cells],
        "ratios": ratios,
    }
    write_results(out, result)
    print(f"\nwrote {out}")
    return result


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=1.0, help="timed seconds per run (after warm-up)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per cell, interleaved; the median rps counts")
    parser.add_argument("--out", type=Path, default=RESULTS / "intake.json")
    parser.add_argument("--serve", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--redis", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.redis)
    else:
        asyncio.run(bench(args.seconds, args.rounds, args.out))


if __name__ == "__main__":
    main()
