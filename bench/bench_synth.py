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
   longest wait for a first audio. Demand = 3 listeners; capacity = the real-time listeners the
   model alone feeds on these same texts (their audio seconds / its seconds).
4. the naive design (synthesize everything, then answer one MP3) against StreamTTS: time to
   first audio with 1 and with 3 concurrent users.
5. the schedule at a GPU's speed, which this CPU cannot reach: the casts of 3 again, through the
   whole worker (Redis, the MP3 encoder, the schedule), with the model replaced by a replay of
   the real model's audio for each chunk (recorded in 3) handed out after ``--gpu-rtf`` times
   its duration. Demand is then below capacity: lowest-lead scheduling (the worker) against
   first come, first served (one cast at a time), for underruns and the longest first-audio wait.

Parts 3-5 admit within capacity as a worker that has measured its model already does (the capacity
part 1 measured; part 5's replay rate): on this CPU three casts exceed it and start in turn, at
the replay's rate all three fit and start at once. Parts 1 and 2, one cast each, start from a
fresh worker's unmeasured model.

    python bench/bench_synth.py [--threads 2] [--rounds 3] [--gpu-rtf 0.2]     (a few minutes on 2 cores)
"""

from __future__ import annotations

import asyncio
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import numpy.typing as npt
from jobstreams import read_jobs
from logfollow import follow
from modelwrap import Wrapped
from redis.asyncio import Redis

import castlog
import chunking
from castlog import SAMPLE_RATE, Audio, CastStore, Entry, LogReader, Meta
from synth.config import SynthConfig
from synth.dispatcher import infer
from synth.model import Synthesizer, load_synthesizer
from synth.model.base import Word
from synth.mp3 import encode_chunk
from synth.worker import Worker

from common import RESULTS, arguments, repo_text, temp_redis, write_results

SHORT = repo_text("short").strip()
PARAGRAPH = repo_text("paragraph").strip()
# A bounded slice of the paragraph: long enough to stream, short enough for the naive design.
FOUR = " ".join(chunking.split_text(PARAGRAPH)[:4])
# Casts of three lengths for the concurrency part.
MIXED = (SHORT, " ".join(chunking.split_text(PARAGRAPH)[:2]), " ".join(chunking.split_text(PARAGRAPH)[2:6]))
BITRATE = 48_000
# Demand counts as below capacity under this fraction of it: the capacity measured here moves by
# a fifth from run to run (2.4 to 3.0 listeners), and the worker's MP3 encoding shares the cores
# that the model alone had to itself.
CLEARLY_BELOW = 0.9
# Part 5's model speed: seconds of synthesis per second of audio, about a GPU's for Kokoro-82M
# (five real-time listeners), where this CPU manages about three.
GPU_RTF = 0.2
Row = dict[str, object]  # one comparison: what, streamtts, reference, ratio, target, met


def voice_of(synth: Synthesizer) -> str:
    voices = synth.voices()
    return "af_heart" if "af_heart" in voices else voices[0]


class Bench:
    def __init__(self, synth: Synthesizer, redis: Redis) -> None:
        self.synth, self.redis, self.store, self.reader = synth, redis, CastStore(redis), LogReader(redis)
        self.voice = voice_of(synth)
        self.cfg = SynthConfig(consumer="bench", poll_s=0.05)

    # ---- the model alone -----------------------------------------------------------------

    def model_time(self, text: str) -> tuple[float, float]:
        """(seconds to synthesize every chunk of ``text`` in a loop, seconds of the first)."""
        started = time.perf_counter()
        first = 0.0
        for k, chunk in enumerate(chunking.split_text(text)):
            infer(self.synth, chunk, self.voice)  # the worker's call
            if k == 0:
                first = time.perf_counter() - started
        return time.perf_counter() - started, first

    # ---- the worker ----------------------------------------------------------------------

    async def worker_casts(
        self, bodies: list[str], *, until: str = "eos", max_active: int | None = None,
        capacity: float | None = None,
    ) -> dict[str, list[Entry]]:
        """Submit ``bodies`` at once to a fresh worker (holding at most ``max_active`` casts, by
        default SYNTH_MAX_ACTIVE's); cast id -> log once each has its first audio
        (``until="audio"``, then the worker is stopped) or its `eos`. ``capacity``: the audio
        seconds per second its model is known to make, as a worker that has been running measured
        it (None: unmeasured, so admission takes one cast to measure it)."""
        await self.redis.flushall()
        worker = Worker(replace(self.cfg, max_active=max_active or self.cfg.max_active), self.redis, self.synth)
        if capacity:  # what admission reads of the speed (ModelSpeed.capacity), measured long enough
            worker.crew.speed.slow_rtf, worker.crew.speed.measured_s = 1 / capacity, self.cfg.capacity_measure_s
        task = asyncio.create_task(worker.run())
        ids = [await self.submit(body) for body in bodies]
        try:
            for cast_id in ids:
                await self.wait_for(cast_id, until)
        finally:
            worker.stop()
            await task
        return {cast_id: await self.reader.read(cast_id, 0, 10_000) for cast_id in ids}

    async def submit(self, text: str) -> str:
        cast_id = castlog.content_id(text, self.voice)
        meta = Meta(title="bench", voice=self.voice, chars=len(text), sentences=chunking.count_chunks(text), created_at=0)
        await self.store.submit(cast_id, text, self.voice, meta)
        return cast_id

    async def wait_for(self, cast_id: str, kind: str) -> None:
        async for entry in follow(self.reader, cast_id, block_ms=1000):
            if entry.kind == kind or castlog.is_terminal(entry.record):
                return

    async def enqueued_at(self) -> dict[str, int]:
        return {job.id: job.enqueued_at for job in await read_jobs(self.redis)}

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
            pcm = [(await loop.run_in_executor(pool, infer, self.synth, c, self.voice))[0] for c in chunking.split_text(text)]
            await loop.run_in_executor(pool, encode_chunk, np.concatenate(pcm), BITRATE)
            return time.perf_counter() - started

        try:
            return list(await asyncio.gather(*(request(body) for body in bodies)))
        finally:
            pool.shutdown()


class PacedReplay(Wrapped):
    """A model as fast as a GPU on this CPU: the real model's audio for each chunk, recorded
    once, handed out after sleeping ``rtf`` times its duration (the sleep, like a GPU's wait,
    leaves the CPU to the rest of the worker)."""

    def __init__(self, real: Synthesizer, rtf: float) -> None:
        super().__init__(real)
        self.rtf = rtf
        self.name = f"paced replay of {real.name}, rtf {rtf:g}"
        self.recorded: dict[tuple[str, str], tuple[npt.NDArray[np.float32], list[Word]]] = {}

    def record(self, text: str, voice: str) -> float:
        """Synthesize every chunk of ``text`` with the real model, as the worker does (timed),
        and keep its audio and words; the seconds that took (the model alone on this text)."""
        started = time.perf_counter()
        for chunk in chunking.split_text(text):
            self.recorded[(chunk, voice)] = self.real.synthesize_timed(chunk, voice)
        return time.perf_counter() - started

    def warm_up(self) -> None:
        pass  # the real model was warmed up when it recorded

    def synthesize_timed(self, text: str, voice: str, speed: float = 1.0) -> tuple[npt.NDArray[np.float32], list[Word]]:
        pcm, words = self.recorded[(text, voice)]  # every chunk was recorded before the run
        time.sleep(self.rtf * len(pcm) / SAMPLE_RATE)
        return pcm, words

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> npt.NDArray[np.float32]:
        return self.synthesize_timed(text, voice, speed)[0]

    def synthesize_phonemes(self, phonemes: str, voice: str, speed: float = 1.0) -> npt.NDArray[np.float32]:
        raise NotImplementedError("the worker synthesizes text; a replay has no phoneme path")


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


async def run(synth: Synthesizer, rounds: int, gpu_rtf: float) -> dict[str, Row]:
    with temp_redis() as server:
        redis = Redis.from_url(server.url)
        try:
            return await measure(Bench(synth, redis), rounds, gpu_rtf)
        finally:
            await redis.aclose()


def step(label: str) -> None:
    print(f"  {label} ...", flush=True)


async def measure(b: Bench, rounds: int, gpu_rtf: float) -> dict[str, Row]:
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
    measured = audio_ms(entries) / 1000 / med(worker_s)  # real-time listeners one worker feeds
    ratio = med([m / w for m, w in zip(model_s, worker_s)])
    out["throughput"] = {
        "what": "whole worker vs model alone, same chunks (s)",
        "streamtts": med(worker_s), "reference": med(model_s), "ratio": ratio,
        "target": ">= 0.95", "met": ratio >= 0.95, "capacity_realtime": measured,
    }
    # 2. time to first audio against the model's time for that first chunk, paired the same way
    first_model, first_worker = [], []
    for r in range(2 * rounds):
        step(f"first audio round {r + 1}/{2 * rounds}")
        first_model.append(b.model_time(chunking.split_text(SHORT)[0])[0])
        first_worker.extend(await b.first_audio_s(await b.worker_casts([SHORT], until="audio")))
    ratio = med([w / m for m, w in zip(first_model, first_worker)])
    out["first_audio"] = {
        "what": "worker first audio vs model's first chunk (s)",
        "streamtts": med(first_worker), "reference": med(first_model), "ratio": ratio,
        "target": "<= 1.15", "met": ratio <= 1.15,
    }
    # 3. three concurrent casts of different lengths; the model alone on the same texts gives
    # the capacity (and records the audio that 5 replays)
    step("three concurrent casts")
    paced = PacedReplay(b.synth, gpu_rtf)
    mixed_model_s = sum(paced.record(text, b.voice) for text in MIXED)
    logs = await b.worker_casts(list(MIXED), capacity=measured)
    capacity = sum(audio_ms(entries) for entries in logs.values()) / 1000 / mixed_model_s
    out["three_casts"] = three_casts_row("3 concurrent casts of different lengths", logs, capacity,
                                         await b.first_audio_s(logs))
    # 4. the naive design against StreamTTS
    for users, bodies in ((1, [FOUR]), (3, list(MIXED))):
        step(f"naive vs StreamTTS, {users} user(s)")
        naive = await b.naive_ttfa(bodies)
        stream = await b.first_audio_s(await b.worker_casts(bodies, until="audio", capacity=measured))
        out[f"naive_{users}_user"] = {
            "what": f"first audio, {users} user(s): StreamTTS vs naive (mean s)",
            "streamtts": statistics.mean(stream), "reference": statistics.mean(naive),
            "ratio": statistics.mean(naive) / statistics.mean(stream), "target": "", "met": None,
        }
    # 5. the schedule at a GPU's speed: lowest lead (the worker) against one cast at a time
    g = Bench(paced, b.redis)  # a replay is a Synthesizer in all that the worker uses
    gpu_capacity = 1 / gpu_rtf
    for label, max_active in (("lowest lead", None), ("one at a time", 1)):
        step(f"the schedule at rtf {gpu_rtf:g}: {label}")
        logs = await g.worker_casts(list(MIXED), max_active=max_active, capacity=gpu_capacity)
        key = "gpu_lowest_lead" if max_active is None else "gpu_one_at_a_time"
        out[key] = three_casts_row(f"3 casts at rtf {gpu_rtf:g} (paced replay), {label}", logs, gpu_capacity,
                                   await g.first_audio_s(logs))
    lowest, serial = out["gpu_lowest_lead"], out["gpu_one_at_a_time"]
    out["gpu_schedule"] = {
        "what": f"longest first-audio wait, 3 casts at rtf {gpu_rtf:g}: lowest lead vs one at a time (s)",
        "streamtts": lowest["longest_first_audio_s"], "reference": serial["longest_first_audio_s"],
        "ratio": float(serial["longest_first_audio_s"]) / float(lowest["longest_first_audio_s"]),  # type: ignore[arg-type]
        "target": "0 underruns (demand below capacity)", "met": lowest["underruns"] == 0,
    }
    return out


def three_casts_row(what: str, logs: dict[str, list[Entry]], capacity: float, first_audio_s: list[float]) -> Row:
    firsts = [first_audio(entries).ts for entries in logs.values()]
    dry = sum(underruns(entries) for entries in logs.values())
    demand = len(logs) / capacity
    return {
        "what": what, "underruns": dry, "longest_first_audio_s": max(first_audio_s),
        "capacity_realtime": capacity, "demand_vs_capacity": demand,
        "target": f"0 underruns when demand/capacity < {CLEARLY_BELOW:g}",
        "met": (dry == 0) if demand < CLEARLY_BELOW else None,
        "first_audio_before_any_eos": max(firsts) < min(es[-1].ts for es in logs.values()),
    }


def report(results: dict[str, Row]) -> None:
    print(f"\n{'comparison':<58} {'StreamTTS':>9} {'reference':>9} {'ratio':>7}  target")
    for row in results.values():
        if "ratio" not in row:
            continue
        met = row["met"]
        verdict = "" if met is None else (" met" if met else " MISSED")
        ratio = float(row["ratio"])  # type: ignore[arg-type]
        print(f"{row['what']!s:<58} {_num(row['streamtts'])} {_num(row['reference'])} {ratio:>6.2f}x  {row['target']}{verdict}")
    print()
    for key in ("three_casts", "gpu_lowest_lead", "gpu_one_at_a_time"):
        three = results[key]
        met = three["met"]
        verdict = "n/a: demand is not clearly below capacity here" if met is None else ("met" if met else "MISSED")
        print(
            f"{three['what']}: {three['underruns']} underrun(s) [{verdict}], "
            f"longest first-audio wait {float(three['longest_first_audio_s']):.2f} s, "  # type: ignore[arg-type]
            f"demand {float(three['demand_vs_capacity']):.2f}x the capacity of "  # type: ignore[arg-type]
            f"{float(three['capacity_realtime']):.2f} real-time listeners, "  # type: ignore[arg-type]
            f"every first audio before any eos: {three['first_audio_before_any_eos']}"
        )


def _num(value: object) -> str:
    return f"{value:>9.2f}" if isinstance(value, float) else f"{value!s:>9}"


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gpu-rtf", type=float, default=GPU_RTF,
                        help="seconds of synthesis per second of audio in part 5 (a GPU's speed)")
    args = parser.parse_args()
    print("loading the model (onnx) ...", flush=True)
    synth = load_synthesizer("onnx", threads=args.threads)
    synth.warm_up()
    results = asyncio.run(run(synth, args.rounds, args.gpu_rtf))
    report(results)
    payload = {"results": results, "threads": args.threads, "rounds": args.rounds, "backend": synth.name,
               "gpu_rtf": args.gpu_rtf}
    write_results(RESULTS / "synth.json", payload)
    print(f"\nwritten to {RESULTS / 'synth.json'}")


if __name__ == "__main__":
    main()
