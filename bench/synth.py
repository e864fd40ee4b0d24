"""The synth worker against its own model, and StreamTTS against a naive design, side by side.

One run on this machine, one model loaded once (onnx, ``--threads``), a throwaway Redis:

1. throughput: the same chunks through the backend in a loop (model alone) against the whole
   worker (job in, `eos` out). Ratio = model time / worker time; target >= 0.95. Rounds are
   short and paired (the median of the pairs' ratios), because other load on the machine
   moves both sides by tens of percent from one minute to the next.
2. time to first audio: the worker's (job enqueued -> first audio record durable) against the
   model's time for that first chunk alone. Target <= 1.15.
3. three concurrent casts of different lengths: underruns (chunks appended after a listener
   who started at the first audio ran dry; target 0 when the demand is below capacity) and the
   longest wait for a first audio. Demand = 3 listeners; capacity = measured in 1.
4. the naive design (synthesize everything, then answer one MP3) against StreamTTS: time to
   first audio with 1 and with 3 concurrent users.

    python bench/synth.py [--threads 2] [--rounds 3]     (a few minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

# This file shares its name with the service it measures: run as a script, its own folder
# must not shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

import castlog  # noqa: E402
from castlog import Audio, CastStore, Entry, Meta  # noqa: E402
from streamtts.redisserver import start_server  # noqa: E402
from synth.config import SynthConfig  # noqa: E402
from synth.model import Synthesizer, load_synthesizer  # noqa: E402
from synth.mp3 import encode_chunk  # noqa: E402
from synth.worker import Worker  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "synth.json"
TEXTS = Path(__file__).resolve().parents[2] / "shared" / "texts"
SHORT = (TEXTS / "short.txt").read_text(encoding="utf-8").strip()
PARAGRAPH = (TEXTS / "paragraph.txt").read_text(encoding="utf-8").strip()
# A bounded slice of the paragraph: long enough to stream, short enough for the naive design.
FOUR = " ".join(castlog.split_text(PARAGRAPH)[:4])
# Casts of three lengths for the concurrency part.
MIXED = (SHORT, " ".join(castlog.split_text(PARAGRAPH)[:2]), " ".join(castlog.split_text(PARAGRAPH)[2:6]))
BITRATE = 48_000
Row = dict[str, object]  # one comparison: what, streamtts, reference, ratio, target, met


def voice_of(synth: Synthesizer) -> str:
    voices = synth.voices()
    return "af_heart" if "af_heart" in voices else voices[0]


class Bench:
    def __init__(self, synth: Synthesizer, redis: Redis) -> None:
        self.synth, self.redis, self.store = synth, redis, CastStore(redis)
        self.voice = voice_of(synth)
        self.cfg = SynthConfig(consumer="bench", poll_s=0.05)

    # ---- the model alone -----------------------------------------------------------------

    def model_time(self, text: str) -> tuple[float, float]:
        """(seconds to synthesize every chunk of ``text`` in a loop, seconds of the first)."""
        started = time.perf_counter()
        first = 0.0
        for k, chunk in enumerate(castlog.split_text(text)):
            self.synth.synthesize(chunk, self.voice)
            if k == 0:
                first = time.perf_counter() - started
        return time.perf_counter() - started, first

    # ---- the worker ----------------------------------------------------------------------

    async def worker_casts(self, bodies: list[str], *, until: str = "eos") -> dict[str, list[Entry]]:
        """Submit ``bodies`` at once to a fresh worker; cast id -> log once each has its first
        audio (``until="audio"``, then the worker is stopped) or its `eos`."""
        await self.redis.flushall()
        worker = Worker(replace(self.cfg, concurrency=max(3, len(bodies))), self.redis, self.synth)
        task = asyncio.create_task(worker.run())
        ids = [await self.submit(body) for body in bodies]
        try:
            for cast_id in ids:
                await self.wait_for(cast_id, until)
        finally:
            worker.stop()
            await task
        return {cast_id: await self.store.read(cast_id, 0, 10_000) for cast_id in ids}

    async def submit(self, text: str) -> str:
        cast_id = castlog.content_id(text, self.voice)
        meta = Meta(title="bench", voice=self.voice, chars=len(text), sentences=castlog.count_chunks(text), created_at=0)
        await self.store.submit(cast_id, text, self.voice, meta)
        return cast_id

    async def wait_for(self, cast_id: str, kind: str) -> None:
        async for entry in self.store.follow(cast_id, block_ms=1000):
            if entry.kind == kind or castlog.is_terminal(entry.record):
                return

    async def enqueued_at(self) -> dict[str, int]:
        rows = await self.redis.xrange(castlog.JOBS)
        return {f[b"id"].decode(): int(f[b"enqueued_at"]) for _, f in rows}

    async def first_audio_s(self, logs: dict[str, list[Entry]]) -> list[float]:
        """Job enqueued -> first audio record, per cast (Redis's clock on both ends)."""
        enqueued = await self.enqueued_at()
        return [(first_audio(entries).ts - enqueued[cast_id]) / 1000 for cast_id, entries in logs.items()]

    # ---- the naive design -----------------------------------------------------------------

    async def naive_ttfa(self, bodies: list[str]) -> list[float]:
        """One request per body, all at once: each synthesizes its whole text, then encodes one
        MP3; the requests share one model thread (as a simple async server with one model)."""
        pool = ThreadPoolExecutor(1)
        loop = asyncio.get_running_loop()

        async def request(text: str) -> float:
            started = time.perf_counter()
            pcm = [await loop.run_in_executor(pool, self.synth.synthesize, c, self.voice) for c in castlog.split_text(text)]
            await loop.run_in_executor(pool, encode_chunk, np.concatenate(pcm), BITRATE)
            return time.perf_counter() - started

        try:
            return list(await asyncio.gather(*(request(body) for body in bodies)))
        finally:
            pool.shutdown()


def first_audio(entries: list[Entry]) -> Entry:
    return next(e for e in entries if e.kind == "audio")


def audio_ms(entries: list[Entry]) -> int:
    return sum(e.record.d for e in entries if isinstance(e.record, Audio))


def underruns(entries: list[Entry]) -> int:
    """Audio records appended after a listener who started at the first audio ran dry."""
    audio = [e for e in entries if isinstance(e.record, Audio)]
    count, heard_ms = 0, 0
    for k, entry in enumerate(audio):
        if k and audio[0].ts + heard_ms < entry.ts:
            count += 1
        assert isinstance(entry.record, Audio)
        heard_ms += entry.record.d
    return count


async def run(synth: Synthesizer, rounds: int) -> dict[str, Row]:
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp), aof=False)
        redis = Redis.from_url(server.url)
        try:
            return await measure(Bench(synth, redis), rounds)
        finally:
            await redis.aclose()
            server.stop()


def step(label: str) -> None:
    print(f"  {label} ...", flush=True)


async def measure(b: Bench, rounds: int) -> dict[str, Row]:
    out: dict[str, Row] = {}
    med = statistics.median
    # 1. throughput: the same chunks; each round pairs the two sides (alternating which goes
    # first) and the median of the rounds' ratios is reported, so drifting load cancels out
    model_s, worker_s = [], []
    for r in range(2 * rounds):
        step(f"throughput round {r + 1}/{2 * rounds}")
        pair: dict[str, float] = {}
        for side in ("model", "worker") if r % 2 == 0 else ("worker", "model"):
            if side == "model":
                pair[side] = b.model_time(SHORT)[0]
            else:
                ((cast_id, entries),) = (await b.worker_casts([SHORT])).items()
                pair[side] = (entries[-1].ts - (await b.enqueued_at())[cast_id]) / 1000
        model_s.append(pair["model"])
        worker_s.append(pair["worker"])
    capacity = audio_ms(entries) / 1000 / med(worker_s)  # real-time listeners one worker feeds
    ratio = med([m / w for m, w in zip(model_s, worker_s)])
    out["throughput"] = {
        "what": "whole worker vs model alone, same chunks (s)",
        "streamtts": med(worker_s), "reference": med(model_s), "ratio": ratio,
        "target": ">= 0.95", "met": ratio >= 0.95, "capacity_realtime": capacity,
    }
    # 2. time to first audio against the model's time for that first chunk, paired the same way
    first_model, first_worker = [], []
    for r in range(2 * rounds):
        step(f"first audio round {r + 1}/{2 * rounds}")
        first_model.append(b.model_time(castlog.split_text(SHORT)[0])[0])
        first_worker.extend(await b.first_audio_s(await b.worker_casts([SHORT], until="audio")))
    ratio = med([w / m for m, w in zip(first_model, first_worker)])
    out["first_audio"] = {
        "what": "worker first audio vs model's first chunk (s)",
        "streamtts": med(first_worker), "reference": med(first_model), "ratio": ratio,
        "target": "<= 1.15", "met": ratio <= 1.15,
    }
    # 3. three concurrent casts of different lengths
    step("three concurrent casts")
    logs = await b.worker_casts(list(MIXED))
    firsts = [first_audio(entries).ts for entries in logs.values()]
    dry = sum(underruns(entries) for entries in logs.values())
    demand = 3 / capacity
    out["three_casts"] = {
        "what": "3 concurrent casts of different lengths",
        "underruns": dry, "longest_first_audio_s": max(await b.first_audio_s(logs)),
        "demand_vs_capacity": demand, "target": "0 underruns when demand/capacity < 1",
        "met": (dry == 0) if demand < 1 else None,
        "first_audio_before_any_eos": max(firsts) < min(es[-1].ts for es in logs.values()),
    }
    # 4. the naive design against StreamTTS
    for users, bodies in ((1, [FOUR]), (3, list(MIXED))):
        step(f"naive vs StreamTTS, {users} user(s)")
        naive = await b.naive_ttfa(bodies)
        stream = await b.first_audio_s(await b.worker_casts(bodies, until="audio"))
        out[f"naive_{users}_user"] = {
            "what": f"first audio, {users} user(s): StreamTTS vs naive (mean s)",
            "streamtts": statistics.mean(stream), "reference": statistics.mean(naive),
            "ratio": statistics.mean(naive) / statistics.mean(stream), "target": "", "met": None,
        }
    return out


def report(results: dict[str, Row]) -> None:
    print(f"\n{'comparison':<58} {'StreamTTS':>9} {'reference':>9} {'ratio':>7}  target")
    for row in results.values():
        if "ratio" not in row:
            continue
        met = row["met"]
        verdict = "" if met is None else (" met" if met else " MISSED")
        ratio = float(row["ratio"])  # type: ignore[arg-type]
        print(f"{row['what']!s:<58} {_num(row['streamtts'])} {_num(row['reference'])} {ratio:>6.2f}x  {row['target']}{verdict}")
    three, capacity = results["three_casts"], results["throughput"]["capacity_realtime"]
    met = three["met"]
    verdict = "n/a: demand exceeds capacity here" if met is None else ("met" if met else "MISSED")
    print(
        f"\n3 concurrent casts: {three['underruns']} underrun(s) [{three['target']}: {verdict}], "
        f"longest first-audio wait {float(three['longest_first_audio_s']):.2f} s, "  # type: ignore[arg-type]
        f"demand {float(three['demand_vs_capacity']):.2f}x the capacity of "  # type: ignore[arg-type]
        f"{float(capacity):.2f} real-time listeners, "  # type: ignore[arg-type]
        f"every first audio before any eos: {three['first_audio_before_any_eos']}"
    )


def _num(value: object) -> str:
    return f"{value:>9.2f}" if isinstance(value, float) else f"{value!s:>9}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("loading the model (onnx) ...", flush=True)
    synth = load_synthesizer("onnx", threads=args.threads)
    synth.warm_up()
    results = asyncio.run(run(synth, args.rounds))
    report(results)
    RESULTS.parent.mkdir(exist_ok=True)
    payload = {"results": results, "threads": args.threads, "rounds": args.rounds, "backend": synth.name}
    RESULTS.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwritten to {RESULTS}")


if __name__ == "__main__":
    main()
