"""Redis memory per finished cast with the audio in Redis (today) and archived, side by side.

Writes N finished casts of the shared paragraph (unique texts: the paragraph and a number),
records straight into the log as the worker would (meta, start, one audio record per planned
chunk with a body of 48 kbit/s MP3 size, eos, a receipt), then measures Redis ``used_memory``
per cast, archives every cast into a file archive and measures again. Then: 50 random casts'
``/audio.mp3`` and records read through edge before and after their archive must be
byte-identical, and the first byte of an archived cast's ``/audio.mp3`` is timed against a
Redis-held one's, requests interleaved (warm: layouts cached; cold: a layout cache of one).

    python bench/bench_memory.py [--casts 2000] [--replays 50] [--rounds 30]
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, web
from redis.asyncio import Redis

from blobstore import StoreConfig, open_blob_store
from castlog import Audio, CastStore, Done, Eos, Meta, Start, announce_done, cast_key, catalog_key, content_id
from chunking import split_text
from edge import Config, create_app
from servicekit import client_for
from streamtts.redisserver import free_port
from synth.archiver import Archiver
from synth.config import ArchiverConfig

from common import RESULTS, arguments, print_rows, print_target, repo_text, temp_redis, write_results

PARAGRAPH = repo_text("paragraph").strip()
VOICE = "af_heart"
BYTES_PER_MS = 6  # 48 kbit/s
MS_PER_CHAR = 65  # about Kokoro's pace
TARGET_BYTES = 2048
SETTLE_S = 2.0
UNLIMITED: dict[str, Any] = {"read_rate": 1e6, "read_burst": 10**7, "max_streams_per_client": 10**6}


async def write_cast(store: CastStore, k: int) -> str:
    text = f"{PARAGRAPH} ({k})"
    cid = content_id(text, VOICE)
    chunks = split_text(text)
    meta = Meta(title=text[:60], voice=VOICE, chars=len(text), sentences=len(chunks), created_at=int(time.time() * 1000))
    await store.submit(cid, text, VOICE, meta)
    records: list[Any] = [Start(attempt=1, resume_from=0, at=meta.created_at)]
    offset = 0
    for i, chunk in enumerate(chunks):
        d = len(chunk) * MS_PER_CHAR
        records.append(Audio(i=i, t=chunk, d=d, o=offset, body=os.urandom(d * BYTES_PER_MS)))
        offset += d
    tail = await store.append(cid, 1, records)
    await store.append(cid, tail, [Eos(sentences=len(chunks), audio_ms=offset, attempts=1)])
    await announce_done(store.redis, Done(id=cid, attempts=1, sentences=len(chunks), audio_ms=offset,
                                          finished_at=meta.created_at))
    return cid


async def in_groups(coros: list[Any], size: int = 32) -> list[Any]:
    out: list[Any] = []
    for k in range(0, len(coros), size):
        out.extend(await asyncio.gather(*coros[k : k + size]))
        print(f"\r  {len(out)}/{len(coros)}", end="", flush=True)
    print()
    return out


async def used_memory(redis: Redis) -> int:
    """``used_memory`` less the clients' buffers (edge's pool comes and goes during the run),
    once Redis's cron has shrunk the buffers of the burst just ended."""
    await asyncio.sleep(SETTLE_S)
    info: Any = await redis.info("memory")
    return int(info["used_memory"]) - int(info["mem_clients_normal"])


async def replay(session: ClientSession, base: str, cid: str) -> tuple[bytes, bytes, bytes]:
    """The cast's MP3, its records page by page, and its state, as a reader gets them."""
    async with session.get(f"{base}/api/casts/{cid}/audio.mp3") as resp:
        mp3 = await resp.read()
    pages, seq = [], 0
    while True:
        async with session.get(f"{base}/api/casts/{cid}/records?seq_num={seq}") as resp:
            page = await resp.read()
        pages.append(page)
        body = json.loads(page)
        if not body["records"]:
            break
        seq = body["next_seq_num"]
    async with session.get(f"{base}/api/casts/{cid}") as resp:
        state = await resp.read()
    return mp3, b"".join(pages), state


async def first_byte_s(session: ClientSession, url: str) -> float:
    start = time.perf_counter()
    async with session.get(url) as resp:
        await resp.content.readany()
        elapsed = time.perf_counter() - start
        await resp.read()
    return elapsed


async def serve_edge(cfg: Config) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(create_app(cfg), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", cfg.port).start()
    return runner, f"http://127.0.0.1:{cfg.port}"


async def first_bytes(session: ClientSession, base: str, held: list[str], archived: list[str],
                      rounds: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {"redis": [], "archived": []}
    for a, b in zip(held, archived):  # a round of warm-up: connections, code paths
        await first_byte_s(session, f"{base}/api/casts/{a}/audio.mp3")
        await first_byte_s(session, f"{base}/api/casts/{b}/audio.mp3")
    for r in range(rounds):
        for a, b in zip(held, archived):
            pair = [("redis", a), ("archived", b)]
            for kind, cid in pair if r % 2 else pair[::-1]:  # either goes first in half the rounds
                samples[kind].append(await first_byte_s(session, f"{base}/api/casts/{cid}/audio.mp3"))
    # Medians and lower quartiles: on a busy machine the quartile shows the path, the median its queue.
    return {**{k: statistics.median(v) for k, v in samples.items()},
            **{f"{k}_p25": statistics.quantiles(v, n=4)[0] for k, v in samples.items()}}


async def main(n: int, replays: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, temp_redis() as server:
        redis = client_for(server.url)
        store = CastStore(redis)
        archive_cfg = StoreConfig((Path(tmp) / "archive").as_uri())
        blobs = await open_blob_store(archive_cfg)
        session = ClientSession()
        runners: list[web.AppRunner] = []
        try:
            await write_cast(store, -1)  # first use of every structure (scripts, the jobs stream)
            base_mem = await used_memory(redis)
            print(f"writing {n} finished casts of the paragraph")
            ids = await in_groups([write_cast(store, k) for k in range(n)])
            held_mem = await used_memory(redis)
            sample = random.Random(13).sample(ids, replays)
            edge_cfg = Config(redis_url=server.url, port=free_port(), archive=archive_cfg, **UNLIMITED)
            runner, base = await serve_edge(edge_cfg)
            runners.append(runner)
            before = [await replay(session, base, cid) for cid in sample]
            per_log = statistics.mean([await redis.memory_usage(cast_key(c)) or 0 for c in sample])
            per_catalog = statistics.mean([await redis.memory_usage(catalog_key(c)) or 0 for c in sample])
            print(f"archiving {n} casts")
            worker = Archiver(redis, blobs, ArchiverConfig(delay_s=0), consumer="bench", poll_s=1.0)
            outcomes = await in_groups([worker.archive_cast(c) for c in ids], size=8)
            archived_mem = await used_memory(redis)
            after = [await replay(session, base, cid) for cid in sample]
            identical = sum(b == a for b, a in zip(before, after))
            per_log_archived = statistics.mean([await redis.memory_usage(cast_key(c)) or 0 for c in sample])
            per_catalog_archived = statistics.mean([await redis.memory_usage(catalog_key(c)) or 0 for c in sample])
            print("timing the first byte of /audio.mp3: Redis-held vs archived")
            held = [await write_cast(store, n + k) for k in range(replays)]
            # a new edge: the first one still caches the sample's layouts from before their archive
            runner, warm_base = await serve_edge(dataclasses.replace(edge_cfg, port=free_port()))
            runners.append(runner)
            warm = await first_bytes(session, warm_base, held, sample, rounds)
            runner, cold_base = await serve_edge(dataclasses.replace(edge_cfg, port=free_port(), layout_cache=1))
            runners.append(runner)
            cold = await first_bytes(session, cold_base, held, sample, rounds)
        finally:
            await session.close()
            for runner in runners:
                await runner.cleanup()
            await blobs.close()
            await redis.aclose()
    today, archived = (held_mem - base_mem) / n, (archived_mem - base_mem) / n
    return {
        "casts": n,
        "archived": outcomes.count("archived"),
        "redis_bytes_per_cast_today": round(today),
        "redis_bytes_per_cast_archived": round(archived),
        "archived_vs_today": archived / today,
        "log_and_catalog_bytes_today": round(per_log + per_catalog),
        "log_and_catalog_bytes_archived": round(per_log_archived + per_catalog_archived),
        "replays_identical": f"{identical}/{replays}",
        "first_byte_archived_vs_redis_warm": warm["archived"] / warm["redis"],
        "first_byte_archived_vs_redis_cold": cold["archived"] / cold["redis"],
        "first_byte_archived_vs_redis_warm_p25": warm["archived_p25"] / warm["redis_p25"],
        "first_byte_archived_vs_redis_cold_p25": cold["archived_p25"] / cold["redis_p25"],
    }


if __name__ == "__main__":
    parser = arguments(__doc__)
    parser.add_argument("--casts", type=int, default=2000)
    parser.add_argument("--replays", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    result = asyncio.run(main(args.casts, args.replays, args.rounds))
    print_rows(result, 40)
    print_target(f"<= {TARGET_BYTES} bytes of Redis per finished cast",
                 result["redis_bytes_per_cast_archived"] <= TARGET_BYTES)
    ok = max(result["first_byte_archived_vs_redis_warm"], result["first_byte_archived_vs_redis_cold"]) <= 1.2
    print_target("first byte of an archived cast within 1.2x of a Redis-held one", ok)
    write_results(RESULTS / "memory.json", {**result, "rounds": args.rounds})
