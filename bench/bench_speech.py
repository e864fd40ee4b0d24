"""Benchmark: `POST /v1/audio/speech` against the native API, and the cost of each format, in one run.

  first byte  the time from sending a request to its first audio byte, side by side:
              native  POST /api/casts (intake), then GET /api/casts/{id}/audio.mp3 (edge)
              v1      POST /v1/audio/speech (intake: the same submit, then the log followed)
              for new casts (the real model makes each; order alternates), for new casts counted
              from the first audio record's append (the read path alone), and for repeats (replays)
  formats     each converter of intake/speech/formats.py over the MP3 chunks those casts hold: CPU time
              per second of audio, and as a share of what the model spent making that audio

Redis, intake, edge and synth (the real model on onnx) run as separate processes, as compose
runs them. Prints the ratios; writes bench/results/speech.json.

    .venv/bin/python bench/bench_speech.py [--fresh 3] [--repeats 20] [--out bench/results/speech.json]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import aiohttp
from jobstreams import read_done
from redis.asyncio import Redis

from castlog import Audio, LogReader
from intake.speech.formats import FORMATS, converter

from common import RESULTS, machine, repo_text, services, temp_redis, write_results

CONVERT_ROUNDS = 5


def sentences() -> list[str]:
    words = repo_text("paragraph").split(". ")
    return [w.strip().rstrip(".") + "." for w in words if len(w.split()) > 4]


async def first_byte(http: aiohttp.ClientSession, method: str, url: str, **kw: Any) -> tuple[float, aiohttp.ClientResponse]:
    started = time.perf_counter()
    resp = await http.request(method, url, **kw)
    await resp.content.readexactly(1)
    return time.perf_counter() - started, resp


# (seconds to the first byte, the cast, when the first byte came in ms since the epoch)
Sample = tuple[float, str, float]


async def native(http: aiohttp.ClientSession, ports: dict[str, int], text: str, voice: str) -> Sample:
    started = time.perf_counter()
    async with http.post(f"http://127.0.0.1:{ports['intake']}/api/casts", json={"text": text, "voice": voice}) as r:
        cast_id = (await r.json())["id"]
    _, resp = await first_byte(http, "GET", f"http://127.0.0.1:{ports['edge']}/api/casts/{cast_id}/audio.mp3")
    took, at = time.perf_counter() - started, time.time() * 1000
    await resp.read()  # to the end: the cast is finished before the next request
    return took, cast_id, at


async def v1(http: aiohttp.ClientSession, ports: dict[str, int], text: str, voice: str) -> Sample:
    body = {"model": "tts-1", "input": text, "voice": voice}
    took, resp = await first_byte(http, "POST", f"http://127.0.0.1:{ports['intake']}/v1/audio/speech", json=body)
    at = time.time() * 1000
    await resp.read()
    return took, resp.headers["X-Cast-Id"], at


async def after_append(reader: LogReader, sample: Sample) -> float:
    """ms from the cast's first audio record (Redis's clock, this host) to the client's first byte:
    the read path's share of a new cast's first byte, without the model's."""
    entries, _ = await reader.read_all(sample[1])
    first = next(e for e in entries if isinstance(e.record, Audio))
    return sample[2] - first.ts


async def first_bytes(http: aiohttp.ClientSession, ports: dict[str, int], voice: str, fresh: int,
                      repeats: int, reader: LogReader) -> dict[str, Any]:
    texts = sentences()
    times: dict[str, dict[str, list[float]]] = {
        mode: {"native": [], "v1": []} for mode in ("fresh", "fresh_after_append", "repeat")
    }
    for k in range(fresh):  # each a new cast; alternate which API goes first
        pair = [("native", native), ("v1", v1)][:: 1 if k % 2 == 0 else -1]
        for j, (name, call) in enumerate(pair):
            sample = await call(http, ports, f"{texts[(2 * k + j) % len(texts)]} ({k})", voice)
            times["fresh"][name].append(sample[0])
            times["fresh_after_append"][name].append(await after_append(reader, sample))
    for k in range(repeats):
        for name, call in [("native", native), ("v1", v1)][:: 1 if k % 2 == 0 else -1]:
            times["repeat"][name].append((await call(http, ports, texts[0], voice))[0])
    out: dict[str, Any] = {}
    for mode, pair in times.items():
        ratio = statistics.median(pair["v1"]) / statistics.median(pair["native"])
        # medians kept in the JSON to tell a ratio of milliseconds from one of seconds
        medians = {name: round(statistics.median(v) * (1 if mode.endswith("append") else 1000), 1)
                   for name, v in pair.items()}
        out[mode] = {"v1_over_native": round(ratio, 3), "n": len(pair["v1"]), "median_ms": medians}
    return out


async def cast_chunks(redis_url: str) -> tuple[list[bytes], float, float]:
    """Every audio body in the log, its audio seconds, and the model's seconds for it (receipts)."""
    redis = Redis.from_url(redis_url)
    reader = LogReader(redis)
    bodies, audio_ms = [], 0
    for key in await redis.keys("pub/casts/*"):
        for entry in (await reader.read_all(key.decode().rsplit("/", 1)[1]))[0]:
            if isinstance(entry.record, Audio):
                bodies.append(entry.record.body)
                audio_ms += entry.record.d
    receipts = await read_done(redis)
    synth_ms = sum(done.synth_ms for done in receipts)
    receipt_audio = sum(done.audio_ms for done in receipts)
    await redis.aclose()
    return bodies, audio_ms / 1000, synth_ms / max(1, receipt_audio)


def conversion_costs(bodies: list[bytes], audio_s: float, model_rtf: float) -> dict[str, Any]:
    out = {}
    for fmt in FORMATS:
        best = float("inf")
        for _ in range(CONVERT_ROUNDS):
            started = time.process_time()
            convert = converter(fmt)
            for body in bodies:
                convert.feed(body)
            convert.close()
            best = min(best, time.process_time() - started)
        out[fmt] = {"cpu_per_audio_s": round(best / audio_s, 5), "of_model": round(best / audio_s / model_rtf, 5)}
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with temp_redis() as redis:
        async with services(redis.url, ("intake", "edge", "synth"), quiet=True, SYNTH_BACKEND="onnx",
                            INTAKE_RATE="1000", INTAKE_BURST="1000", EDGE_READ_RATE="1000",
                            EDGE_READ_BURST="1000") as ports:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as http:
                async with http.get(f"http://127.0.0.1:{ports['intake']}/api/voices") as r:
                    voice = (await r.json())["default"]
                conn = Redis.from_url(redis.url)
                firsts = await first_bytes(http, ports, voice, args.fresh, args.repeats, LogReader(conn))
                await conn.aclose()
            bodies, audio_s, model_rtf = await cast_chunks(redis.url)
            costs = conversion_costs(bodies, audio_s, model_rtf)
    return {"first_byte": firsts, "formats": costs, "audio_s": round(audio_s, 2), "model_rtf": round(model_rtf, 3),
            "machine": machine()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fresh", type=int, default=5, help="new casts per API")
    parser.add_argument("--repeats", type=int, default=20, help="replays per API")
    parser.add_argument("--out", type=Path, default=RESULTS / "speech.json")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print("first byte, v1 / native (median):")
    for mode, row in result["first_byte"].items():
        print(f"  {mode:18} {row['v1_over_native']:.2f}x  (n={row['n']}; target <= 1.1x)")
    print(f"format conversion over {result['audio_s']} s of the casts' audio (model: rtf {result['model_rtf']}):")
    for fmt, row in result["formats"].items():
        print(f"  {fmt:5} {row['cpu_per_audio_s'] * 1000:7.2f} ms CPU per audio s  "
              f"= {row['of_model'] * 100:6.2f}% of the model's time for it")
    write_results(args.out, result)


if __name__ == "__main__":
    main()
