"""Benchmark: 10, 100 and 1,000 concurrent ``POST /v1/audio/speech`` streams of one cast; Redis
commands per record must stay flat as the streams grow (intake's one shared tail).

``python -m intake`` runs in its own process against one real redis-server started here (no AOF,
a published voice list, no synth: this script appends the records as the worker would, real MP3
chunks of a tone). For each size, N streams of one text are opened on raw sockets (they all
follow one cast), and once every stream waits for audio this process appends ``--records``
audio records ``--interval-ms`` apart and waits until every stream has received all of their
bytes. Measured over that window, at Redis (INFO commandstats, the append script's own commands
left out, and the stream seats' lease renewals counted apart): the commands intake issued
per record; and intake's CPU per delivered record (its
process CPU time). The per-stream costs before it (the claim, the seats) and after it (each
stream's seat given back) are per stream, not per record, and are left out. Writes
bench/results/v1streams.json.

    .venv/bin/python bench/bench_v1streams.py [--streams 10,100,1000] [--records 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from redis.asyncio import Redis

from castlog import Audio, CastStore, Eos, LogReader, Start, VoiceList, content_id, publish_voices
from streamtts.redisserver import free_port
from synth.mp3 import encode_chunk

from common import RESULTS, arguments, machine, print_target, temp_redis, write_results

VOICE = "af_heart"
# The append script's own commands, and ours: not intake's reads.
NOT_INTAKE = {"cmdstat_evalsha", "cmdstat_eval", "cmdstat_xadd", "cmdstat_xlen", "cmdstat_time",
              "cmdstat_info", "cmdstat_ping", "cmdstat_client|setinfo", "cmdstat_hello"}
APPEND_XREVRANGE = "cmdstat_xrevrange"  # each append reads its predecessor's stamp
# The stream seats' lease renewal (castlog.slots RENEW, every third of a lease, one ZSCORE, ZADD
# and PEXPIRE per open stream): a cost per stream and lease period that may fall in the window
# by chance, counted apart from the per-record commands.
RENEWAL = {"cmdstat_zscore", "cmdstat_zadd", "cmdstat_pexpire", "cmdstat_script|load"}
WAIT_S = 120.0
LISTENING = re.compile(rb'^streamtts_intake_listeners\{kind="speech"\} (\S+)$', re.M)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def tone_chunk(ms: int) -> tuple[bytes, int]:
    t = np.arange(24 * ms) / 24_000
    chunk = encode_chunk((0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32))
    return chunk.data, chunk.duration_ms


class Stream:
    """One ``/v1/audio/speech`` response read on a raw connection: the bytes received so far."""

    def __init__(self) -> None:
        self.received = 0
        self.task: asyncio.Task[None] | None = None

    async def run(self, port: int, body: bytes) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        try:
            while data := await reader.read(1 << 16):
                self.received += len(data)
        finally:
            writer.close()


async def following(port: int) -> int:
    """Intake's open speech listeners, from its /metrics (a stream's headers wait for its first audio)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    text = await reader.read()
    writer.close()
    m = LISTENING.search(text)
    return int(float(m.group(1))) if m else 0


async def commands(redis: Redis) -> dict[str, int]:
    return {k: int(v["calls"]) for k, v in (await redis.info("commandstats")).items()}


async def run_size(n: int, port: int, pid: int, redis: Redis, args: argparse.Namespace, serial: int) -> dict[str, Any]:
    text = f"Hello there, listener number {serial}. This cast is followed by many streams at once."
    cast_id = content_id(text, VOICE)
    body = json.dumps({"model": "tts-1", "input": text, "voice": VOICE, "response_format": "mp3"}).encode()
    streams = [Stream() for _ in range(n)]
    for s in streams:
        s.task = asyncio.create_task(s.run(port, body))
    reader, store = LogReader(redis), CastStore(redis)
    while await reader.tail(cast_id) == 0:  # the first stream's claim made the cast
        await asyncio.sleep(0.05)
    seq = await store.append(cast_id, 1, [Start(attempt=1, resume_from=0, at=0)])
    deadline = time.monotonic() + WAIT_S
    while (now := await following(port)) < n:  # every stream follows the cast
        if time.monotonic() > deadline:
            raise SystemExit(f"{n} streams: only {now} follow the cast")
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # the last joins settle into the tail's read
    chunk, ms = tone_chunk(400)
    start = [s.received for s in streams]
    calls0, cpu0 = await commands(redis), cpu_seconds(pid)
    for i in range(args.records):
        seq = await store.append(cast_id, seq, [Audio(i=i, t=f"chunk {i}", d=ms, o=ms * i, body=chunk)])
        await asyncio.sleep(args.interval_ms / 1000)
    want = args.records * len(chunk)
    while any(s.received - s0 < want for s, s0 in zip(streams, start)):
        if time.monotonic() > deadline:
            raise SystemExit(f"{n} streams: not every stream got the audio")
        await asyncio.sleep(0.02)
    cpu, calls1 = cpu_seconds(pid) - cpu0, await commands(redis)
    await store.append(cast_id, seq, [Eos(sentences=args.records, audio_ms=ms * args.records, attempts=1)])
    await asyncio.gather(*(s.task for s in streams if s.task is not None))
    diff = {k: v - calls0.get(k, 0) for k, v in calls1.items() if k not in NOT_INTAKE and v != calls0.get(k, 0)}
    diff[APPEND_XREVRANGE] = diff.get(APPEND_XREVRANGE, 0) - args.records
    diff = {k: v for k, v in diff.items() if v}
    per_record = {k: v for k, v in diff.items() if k not in RENEWAL}
    row = {
        "streams": n, "records": args.records,
        "redis_commands_per_record": round(sum(per_record.values()) / args.records, 2),
        "slot_renewal_commands": sum(v for k, v in diff.items() if k in RENEWAL),
        "intake_cpu_us_per_delivery": round(cpu / (n * args.records) * 1e6, 1),
        "commands": diff,
    }
    print(f"{n:>5} streams: {row['redis_commands_per_record']:5.2f} Redis commands per record {per_record}, "
          f"intake CPU {row['intake_cpu_us_per_delivery']:6.1f} us per delivery", flush=True)
    return row


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(x) for x in args.streams.split(",")]
    port = free_port()
    with temp_redis() as server:
        redis = Redis.from_url(server.url)
        await redis.config_set("maxclients", 10000)
        await publish_voices(redis, VoiceList(voices=(VOICE,), default=VOICE, backend="onnx", worker="bench", at=1),
                             maxlen=100)
        most = str(max(sizes) + 10)
        env = dict(os.environ, REDIS_URL=server.url, INTAKE_HOST="127.0.0.1", INTAKE_PORT=str(port),
                   INTAKE_MAX_SPEECH_STREAMS=most, INTAKE_SPEECH_STREAMS_PER_CLIENT=most,
                   INTAKE_RATE="100000", INTAKE_BURST="1000000", INTAKE_LOG_LEVEL="WARNING")
        proc = subprocess.Popen([sys.executable, "-m", "intake"], env=env, stdin=subprocess.DEVNULL)
        try:
            for _ in range(400):
                try:
                    _, w = await asyncio.open_connection("127.0.0.1", port)
                    w.close()
                    break
                except OSError:
                    await asyncio.sleep(0.05)
            rows = [await run_size(n, port, proc.pid, redis, args, k) for k, n in enumerate(sizes)]
        finally:
            proc.terminate()
            proc.wait(30)
            await redis.aclose()
    per_record = [r["redis_commands_per_record"] for r in rows]
    print_target(f"Redis commands per record flat from {sizes[0]} to {sizes[-1]} streams ({per_record})",
                 max(per_record) <= per_record[0] + 0.5)
    return {"benchmark": "v1streams", "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
            "settings": {"records": args.records, "interval_ms": args.interval_ms}, "sizes": rows}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--streams", default="10,100,1000", help="comma-separated stream counts")
    parser.add_argument("--records", type=int, default=20, help="audio records appended per size")
    parser.add_argument("--interval-ms", type=float, default=100.0, help="pause between appends")
    parser.add_argument("--out", type=Path, default=RESULTS / "v1streams.json")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # 1,000 streams: more than the usual soft limit
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    write_results(args.out, asyncio.run(bench(args)))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
