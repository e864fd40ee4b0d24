"""Benchmark: one cast fanned out to 100, 1000, 2000 and 5000 SSE listeners, edge vs a naive edge.

  edge   ``python -m edge`` as shipped: one shared blocking XREAD per process, fanned out to
         bounded listener queues
  naive  the same SSE frames from a server that runs one blocking XREAD per listener, each on
         its own Redis connection (``logfollow.follow``)
  base   with ``--base DIR``: ``python -m edge`` from another checkout (say, main), to compare a
         change with what it replaces in one run

Each server runs in its own process on a loopback port against one real redis-server (no AOF)
started here. For each size and server, a listener process (a plain epoll loop, the cheapest
Python client) opens N SSE connections and waits until all of them have replayed the log; then
this process appends records (sentences of the shared article text, with a filler body of
``--body-bytes``) one every ``--interval-ms`` and measures, per record and listener: the latency
from just before the append to receipt (p50, p99; receipt is when the listener process's epoll
reported the bytes, so its own pass over thousands of sockets is not counted as the server's),
the server's CPU per delivered record (its process CPU time), and
the Redis commands the server issued per appended record (INFO commandstats, the append
script's own commands left out or subtracted). The servers, the listeners and Redis share this
machine's cores. Prints the ratios naive / edge (and edge / base); writes bench/results/edge.json.

    .venv/bin/python bench/bench_edge.py [--listeners 100,1000,2000,5000] [--records 40] [--base OTHER_CHECKOUT]
        [--rounds 2] [--skip-naive] [--profile STATS_FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import resource
import select
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from aiohttp import web
from logfollow import follow
from redis.asyncio import Redis

from castlog import Audio, CastStore, Eos, LogReader, Meta, Start, content_id
from chunking import split_text
from fanout import Item
from servicekit import sse
from streamtts.redisserver import free_port

from common import RESULTS, arguments, repo_text, temp_redis

CLK_TCK = os.sysconf("SC_CLK_TCK")
READY_TIMEOUT_S = 120.0
DRAIN_TIMEOUT_S = 60.0
# The append script's own commands, and ours: not the server's reads.
NOT_SERVER = {"cmdstat_evalsha", "cmdstat_eval", "cmdstat_xadd", "cmdstat_xlen", "cmdstat_time",
              "cmdstat_info", "cmdstat_ping", "cmdstat_client|setinfo", "cmdstat_hello"}
# The append script also reads its predecessor's stamp, one XREVRANGE per append to a log that
# is not empty: a server may issue XREVRANGE too, so these are subtracted, not the name left out.
APPEND_XREVRANGE = "cmdstat_xrevrange"
ID_RE = re.compile(rb"(?:^|\n)id: (\d+)\n")


# --- the naive server (its own process) ------------------------------------------------------


def naive_app(redis_url: str) -> web.Application:
    """One Redis connection and one blocking XREAD loop per listener: the design edge replaces."""

    async def events(request: web.Request) -> web.StreamResponse:
        cast_id = request.match_info["id"]
        conn = Redis.from_url(redis_url, single_connection_client=True, socket_timeout=None)
        resp = web.StreamResponse(headers=sse.HEADERS)
        await resp.prepare(request)
        try:
            async for entry in follow(LogReader(conn), cast_id, int(request.query.get("seq_num", "0"))):
                await resp.write(Item(entry).sse())
            await resp.write_eof()
        except ConnectionResetError:
            pass
        finally:
            await conn.aclose()
        return resp

    app = web.Application()
    app.router.add_get("/api/casts/{id}/events", events)
    return app


# --- the listeners (their own process) ---------------------------------------------------------
# A plain epoll loop over raw sockets, no asyncio: the cheapest Python client, so that receipt
# times measure the server's fan-out rather than the client's own queue.


def serve_listeners(port: int, cast_id: str, n: int) -> None:
    """Open ``n`` SSE connections; on stdout: ``ready`` once all replayed, ``all <seq>`` each time
    every connection has <seq>, and at the end one JSON line {cpu: its CPU seconds, got: {seq:
    [receipt times]}}."""
    request = (f"GET /api/casts/{cast_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               "Accept: text/event-stream\r\n\r\n").encode()
    poll = select.epoll()
    socks: dict[int, socket.socket] = {}
    tails: dict[int, bytes] = {}
    got: dict[int, list[float]] = {}
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(request)
        sock.setblocking(False)
        socks[sock.fileno()] = sock
        tails[sock.fileno()] = b""
        poll.register(sock.fileno(), select.EPOLLIN)
    ended = 0
    while ended < n:
        events = poll.poll(1.0)
        # receipt: when epoll reported the bytes there, not when this loop reached their socket
        # (its own pass over thousands of sockets would count as the server's delay)
        now = time.time()
        for fd, _ in events:
            data = socks[fd].recv(1 << 18)
            tail = tails[fd]
            buf = tail + data if tail else data
            cut = buf.rfind(b"\n\n")
            if cut < 0:
                tails[fd] = buf
                continue
            tails[fd] = buf[cut + 2 :]
            for m in ID_RE.finditer(buf, 0, cut + 2):
                seq = int(m.group(1))
                times = got.setdefault(seq, [])
                times.append(now)
                if len(times) == n:  # the last connection got it: tell the driver
                    print("ready" if seq == 1 else f"all {seq}", flush=True)
            if b"event: eos" in buf:
                ended += 1
                poll.unregister(fd)
    for sock in socks.values():
        sock.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"cpu": usage.ru_utime + usage.ru_stime, "got": {str(k): v for k, v in got.items()}}), flush=True)


class Listeners:
    """The listener process, seen from here."""

    def __init__(self, port: int, cast_id: str, n: int) -> None:
        self.proc = subprocess.Popen(
            # one argument: a cast id may begin with "-", which argparse would take for an option
            [sys.executable, __file__, f"--serve-listeners={port}:{cast_id}:{n}"],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None
        self.out = self.proc.stdout

    async def line(self, timeout_s: float) -> str:
        raw = await asyncio.wait_for(asyncio.to_thread(self.out.readline), timeout_s)
        if not raw:
            raise RuntimeError(f"the listener process ended (code {self.proc.wait()})")
        return raw.decode().strip()

    async def until(self, prefix: str, timeout_s: float, seq: int = -1) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            line = await self.line(max(0.1, deadline - time.monotonic()))
            if line.startswith(prefix) and (seq < 0 or int(line.split()[1]) >= seq):
                return line


# --- one cell: an implementation at N listeners ----------------------------------------------


@dataclass
class Cell:
    impl: str
    listeners: int
    records: int
    deliveries: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    server_cpu_us_per_delivery: float
    server_sys_us_per_delivery: float  # of which in the kernel (the socket writes)
    client_cpu_us_per_delivery: float  # the listener process, whole run: it competes for the cores
    redis_commands_per_record: float
    redis_cpu_us_per_record: float
    commands: dict[str, int]


def cpu_split(pid: int) -> tuple[float, float]:
    """The process's user and system (kernel: its socket writes) CPU seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


async def command_calls(redis: Redis) -> tuple[dict[str, int], float]:
    stats = await redis.info("commandstats")
    cpu = await redis.info("cpu")
    return {k: int(v["calls"]) for k, v in stats.items()}, float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])


async def run_cell(impl: str, n: int, port: int, pid: int, redis: Redis, args: argparse.Namespace,
                   sentences: list[str], serial: int) -> Cell:
    store = CastStore(redis)
    cast_id = content_id(f"bench {impl} {n} {serial}", "af_heart")
    meta = Meta(title="bench", voice="af_heart", chars=1, sentences=args.records, created_at=0)
    assert await store.submit(cast_id, "bench", "af_heart", meta) == "new"
    tail = await store.append(cast_id, 1, [Start(attempt=1, resume_from=0, at=0)])
    listeners = Listeners(port, cast_id, n)
    await listeners.until("ready", READY_TIMEOUT_S)
    await asyncio.sleep(0.3)  # the last joins settle (edge: the shared tail's XREAD includes the cast)
    calls0, redis_cpu0 = await command_calls(redis)
    user0, sys0 = cpu_split(pid)
    sent: dict[int, float] = {}
    body = bytes(args.body_bytes)
    for k in range(args.records):
        record = Audio(i=k, t=sentences[k % len(sentences)], d=3000, o=3000 * k, body=body)
        sent[tail] = time.time()
        tail = await store.append(cast_id, tail, [record])
        await asyncio.sleep(args.interval_ms / 1000)
    await listeners.until("all", DRAIN_TIMEOUT_S, seq=tail - 1)
    user1, sys1 = cpu_split(pid)
    cpu, kernel = user1 - user0 + sys1 - sys0, sys1 - sys0
    calls1, redis_cpu1 = await command_calls(redis)
    await store.append(cast_id, tail, [Eos(sentences=args.records, audio_ms=1, attempts=1)])
    report = json.loads(await listeners.until("{", DRAIN_TIMEOUT_S))
    got, client_cpu = report["got"], report["cpu"]
    listeners.proc.wait(10)
    if args.per_record:
        for seq, t0 in sent.items():
            ts = sorted((t - t0) * 1000 for t in got.get(str(seq), []))
            print(f"   seq {seq}: first {ts[0]:.1f} median {ts[len(ts)//2]:.1f} last {ts[-1]:.1f}")
    latencies = sorted((t - t0) * 1000 for seq, t0 in sent.items() for t in got.get(str(seq), []))
    missing = n * len(sent) - len(latencies)
    if missing:
        raise AssertionError(f"{impl} at {n}: {missing} deliveries missing")
    commands = {k: v - calls0.get(k, 0) for k, v in calls1.items()
                if k not in NOT_SERVER and v != calls0.get(k, 0)}
    commands[APPEND_XREVRANGE] = commands.get(APPEND_XREVRANGE, 0) - len(sent)  # our appends'
    if commands[APPEND_XREVRANGE] < 0:
        raise AssertionError(f"{impl} at {n}: fewer XREVRANGEs than appends: {commands}")
    commands = {k: v for k, v in commands.items() if v}
    deliveries = len(latencies)
    return Cell(
        impl=impl, listeners=n, records=len(sent), deliveries=deliveries,
        p50_ms=round(statistics.median(latencies), 2),
        p99_ms=round(latencies[min(deliveries - 1, int(deliveries * 0.99))], 2),
        max_ms=round(latencies[-1], 2),
        server_cpu_us_per_delivery=round(cpu / deliveries * 1e6, 2),
        server_sys_us_per_delivery=round(kernel / deliveries * 1e6, 2),
        client_cpu_us_per_delivery=round(client_cpu / (n * (len(sent) + 3)) * 1e6, 2),
        redis_commands_per_record=round(sum(commands.values()) / len(sent), 2),
        redis_cpu_us_per_record=round((redis_cpu1 - redis_cpu0) / len(sent) * 1e6, 1),
        commands=commands,
    )


# --- orchestration -----------------------------------------------------------------------------


def spawn(impl: str, port: int, redis_url: str, base: Path | None, profile: Path | None = None) -> subprocess.Popen[bytes]:
    env = dict(os.environ, REDIS_URL=redis_url, EDGE_HOST="127.0.0.1", EDGE_PORT=str(port),
               EDGE_MAX_STREAMS_PER_CLIENT="100000", EDGE_READ_RATE="100000", EDGE_READ_BURST="1000000",
               EDGE_LOG_LEVEL="WARNING",
               # the stream seats' renewal (every third of a lease: 1000 listeners, 3000 commands
               # at once) would land in one cell's window by chance; it is not the fan-out's work
               EDGE_STREAM_LEASE_S="3600")
    if impl == "base" and base is not None:  # its packages first: they shadow this checkout's
        env["PYTHONPATH"] = os.pathsep.join([str(base / "libs"), str(base / "services"), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, __file__, "--serve-naive", str(port)] if impl == "naive" else [sys.executable, "-m", "edge"]
    if impl == "edge" and profile is not None:  # cProfile's stats are written when it stops
        cmd[1:1] = ["-m", "cProfile", "-o", str(profile)]
    return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)


async def wait_listening(port: int) -> None:
    for _ in range(200):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port}")


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    sentences = split_text(repo_text("article"))
    counts = [int(x) for x in args.listeners.split(",")]
    with temp_redis() as server:
        redis = Redis.from_url(server.url)
        await redis.config_set("maxclients", 10000)
        impls = ("edge", "base", "naive") if args.base else ("edge", "naive")
        impls = impls[:-1] if args.skip_naive else impls
        procs = {impl: (free_port(), None) for impl in impls}
        running: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
        cells: list[Cell] = []
        try:
            for impl, (port, _) in procs.items():
                running[impl] = (port, spawn(impl, port, server.url, args.base, args.profile))
            for port, _proc in running.values():
                await wait_listening(port)
            serial = 0
            for n in counts:
                # side by side at each size, so drift hits both alike; each round reverses the
                # order, so neither always runs first (--rounds: medians of the rounds)
                order = [impl for r in range(args.rounds) for impl in (impls if r % 2 == 0 else impls[::-1])]
                for impl in order:
                    port, proc = running[impl]
                    serial += 1
                    cell = await run_cell(impl, n, port, proc.pid, redis, args, sentences, serial)
                    cells.append(cell)
                    print(f"{impl:>5} {n:>5} listeners: p50 {cell.p50_ms:7.1f} ms  p99 {cell.p99_ms:7.1f} ms  "
                          f"cpu {cell.server_cpu_us_per_delivery:6.1f} us/delivery ({cell.server_sys_us_per_delivery:4.1f} sys) "
                          f"(listeners {cell.client_cpu_us_per_delivery:5.1f})  "
                          f"redis {cell.redis_commands_per_record:7.1f} cmd/record", flush=True)
                    await asyncio.sleep(0.5)
        finally:
            for _, proc in running.values():
                proc.terminate()
            for _, proc in running.values():
                proc.wait(10)
            await redis.aclose()
    return report(cells, args)


def medians(cells: list[Cell]) -> dict[tuple[str, int], Cell]:
    """One cell per implementation and size: the median of its rounds' latencies and costs."""
    groups: dict[tuple[str, int], list[Cell]] = {}
    for c in cells:
        groups.setdefault((c.impl, c.listeners), []).append(c)
    return {key: replace(
        runs[0],
        p50_ms=round(statistics.median(c.p50_ms for c in runs), 2),
        p99_ms=round(statistics.median(c.p99_ms for c in runs), 2),
        server_cpu_us_per_delivery=round(statistics.median(c.server_cpu_us_per_delivery for c in runs), 2),
        server_sys_us_per_delivery=round(statistics.median(c.server_sys_us_per_delivery for c in runs), 2),
        redis_commands_per_record=round(statistics.median(c.redis_commands_per_record for c in runs), 2),
    ) for key, runs in groups.items()}


def report(cells: list[Cell], args: argparse.Namespace) -> dict[str, Any]:
    by = medians(cells)
    counts = sorted({c.listeners for c in cells})
    ratios: list[dict[str, Any]] = []
    base_ratios = compare_base(by) if ("base", counts[0]) in by else []
    if args.skip_naive:
        for n in counts:
            cell = by[("edge", n)]
            print(f"edge at {n} listeners: p99 {cell.p99_ms} ms (target <= 100), "
                  f"{cell.server_cpu_us_per_delivery} us server CPU per delivery (target <= 10)")
        return {"benchmark": "edge", "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "settings": {"records": args.records, "interval_ms": args.interval_ms, "body_bytes": args.body_bytes},
                "cells": [asdict(c) for c in cells], "ratios_edge_over_base": base_ratios}
    print("\nnaive / edge (higher: edge better)")
    print(f"{'listeners':>9} {'p50':>8} {'p99':>8} {'cpu/delivery':>13} {'redis cmd/record':>17}")
    for n in sorted({c.listeners for c in cells}):
        e, v = by[("edge", n)], by[("naive", n)]
        row = {
            "listeners": n,
            "p50": round(v.p50_ms / e.p50_ms, 2),
            "p99": round(v.p99_ms / e.p99_ms, 2),
            "cpu_per_delivery": round(v.server_cpu_us_per_delivery / e.server_cpu_us_per_delivery, 2),
            "redis_commands_per_record": round(v.redis_commands_per_record / max(e.redis_commands_per_record, 0.01), 1),
        }
        ratios.append(row)
        print(f"{n:>9} {row['p50']:>7}x {row['p99']:>7}x {row['cpu_per_delivery']:>12}x "
              f"{row['redis_commands_per_record']:>16}x")
    edge_cmds = [by[("edge", n)].redis_commands_per_record for n in sorted({c.listeners for c in cells})]
    print(f"\nedge Redis commands per record at each size: {edge_cmds} (independent of listeners)")
    for n in counts:
        cell = by[("edge", n)]
        verdict = "meets" if cell.p99_ms <= 100 else "MISSES"
        print(f"edge p99 at {n} listeners: {cell.p99_ms} ms ({verdict} the 100 ms target), "
              f"{cell.server_cpu_us_per_delivery} us server CPU per delivery (target <= 10)")
    return {
        "benchmark": "edge",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "settings": {"records": args.records, "interval_ms": args.interval_ms, "body_bytes": args.body_bytes},
        "cells": [asdict(c) for c in cells],
        "ratios_naive_over_edge": ratios,
        **({"base": str(args.base), "ratios_edge_over_base": base_ratios} if base_ratios else {}),
    }


def compare_base(by: dict[tuple[str, int], Cell]) -> list[dict[str, Any]]:
    """edge / base per size: below 1 is this checkout better."""
    rows = []
    print("\nedge / base (below 1: this checkout better)")
    print(f"{'listeners':>9} {'p50':>8} {'p99':>8} {'cpu/delivery':>13} {'redis cmd/record':>17}")
    for n in sorted(k[1] for k in by if k[0] == "base"):
        e, b = by[("edge", n)], by[("base", n)]
        row = {
            "listeners": n,
            "p50": round(e.p50_ms / b.p50_ms, 2),
            "p99": round(e.p99_ms / b.p99_ms, 2),
            "cpu_per_delivery": round(e.server_cpu_us_per_delivery / b.server_cpu_us_per_delivery, 2),
            "redis_commands_per_record": f"{e.redis_commands_per_record} / {b.redis_commands_per_record}",
        }
        rows.append(row)
        print(f"{n:>9} {row['p50']:>7}x {row['p99']:>7}x {row['cpu_per_delivery']:>12}x "
              f"{row['redis_commands_per_record']:>17}")
    return rows


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--listeners", default="100,1000,2000,5000", help="comma-separated listener counts")
    parser.add_argument("--records", type=int, default=40, help="records appended per cell")
    parser.add_argument("--interval-ms", type=float, default=100.0,
                        help="pause between appends (100: ten sentences a second, a worker far ahead)")
    parser.add_argument("--body-bytes", type=int, default=2048, help="audio body size of each record")
    parser.add_argument("--per-record", action="store_true",
                        help="also print each record's latency to its first, median and last listener")
    parser.add_argument("--base", type=Path, help="also run python -m edge from another checkout (say, a worktree of main)")
    parser.add_argument("--skip-naive", action="store_true", help="leave the naive server out (with --base)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run each size this many times, the order reversed each round; ratios of medians")
    parser.add_argument("--profile", type=Path, help="run this checkout's edge under cProfile; its stats to this file")
    parser.add_argument("--out", type=Path, default=RESULTS / "edge.json")
    parser.add_argument("--serve-naive", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--serve-listeners", metavar="PORT:CAST:N", help=argparse.SUPPRESS)
    args = parser.parse_args()
    raise_fd_limit()
    if args.serve_listeners:
        port, cast_id, n = args.serve_listeners.split(":")
        serve_listeners(int(port), cast_id, int(n))
        return
    if args.serve_naive:
        web.run_app(naive_app(os.environ["REDIS_URL"]), host="127.0.0.1", port=args.serve_naive,
                    handler_cancellation=True, print=None, access_log=None)
        return
    result = asyncio.run(bench(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
