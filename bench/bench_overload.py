"""Overload: five new paragraphs at once, admitted within the worker's measured capacity.

One run, one throwaway Redis, the whole worker (the consumer group, admission, the schedule, the
MP3 encoder, the conditional appends) on five casts. Each cast has one listener who starts at its
first byte (its first audio record's stamp) and plays in real time; a listener stalls whenever
the next chunk's record is stamped after the moment it is needed (all from the log's stamps,
nothing sampled). Reported: each listener's stall after its first audio, the worst and the total,
each first audio and the last, the first `queue` note's estimate against the true start, and how
far its notes' estimates were off. Target: every listener <= 2 s of stall in all. (The even
sharing this was once set against is gone, #34; bench/results/overload*.json from before hold
both sides.)

The model: by default a stand-in at the real model's speed measured here first (onnx on this
CPU: its real-time factor and audio per character over the paragraph's chunks, a few seconds),
a tone of that length handed out after that RTF times its duration; five real paragraphs take
the real model ~5 minutes on 2 shared cores. ``--real`` runs the real model instead.

``--rtf`` paces the stand-in at a given speed instead (the results then go to
``overload_rtf<RTF>.json``; ``--real``'s to ``overload_real.json``): the model's speed on this
CPU moves with the other load on it.

The worker's other settings come from the environment (``SYNTH_ADMIT_HEADROOM=0.7 python ...``).

    python bench/bench_overload.py [--threads 2] [--real | --rtf 0.4]
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
from redis.asyncio import Redis

import castlog
import chunking
from castlog import SAMPLE_RATE, Audio, CastStore, Entry, LogReader, Meta, Queued, Start
from synth.config import SynthConfig
from synth.model import Synthesizer, load_synthesizer
from synth.worker import Worker

from common import RESULTS, arguments, machine, print_rows, print_target, repo_text, temp_redis, write_results

PARAGRAPH = repo_text("paragraph").strip()
OPENINGS = ("First", "Second", "Third", "Fourth", "Fifth")  # five new casts: five content ids
STALL_TARGET_S = 2.0
SPEED_CHUNKS = 4  # chunks of the paragraph the real model is timed on


class Paced:
    """A synthesizer at a set speed: a tone of ``audio_s_per_char`` a character, after sleeping
    ``rtf`` times its length (the model thread waits as it would for the real model)."""

    name = "paced"

    def __init__(self, rtf: float, audio_s_per_char: float, voices: list[str]) -> None:
        self.rtf, self.audio_s_per_char, self._voices = rtf, audio_s_per_char, voices

    def voices(self) -> list[str]:
        return list(self._voices)

    def warm_up(self) -> None:
        pass

    def phonemize(self, text: str, voice: str) -> str:
        return text.lower()

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> npt.NDArray[np.float32]:
        seconds = len(text) * self.audio_s_per_char
        time.sleep(self.rtf * seconds)
        t = np.arange(int(seconds * SAMPLE_RATE), dtype=np.float32) / SAMPLE_RATE
        return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)

    def synthesize_phonemes(self, phonemes: str, voice: str, speed: float = 1.0) -> npt.NDArray[np.float32]:
        return self.synthesize(phonemes, voice, speed)


def measure_model(synth: Synthesizer, voice: str) -> tuple[float, float]:
    """The real model's RTF and audio seconds per character over the paragraph's first chunks."""
    took = audio = chars = 0.0
    for text in chunking.split_text(PARAGRAPH)[:SPEED_CHUNKS]:
        started = time.perf_counter()
        pcm = synth.synthesize(text, voice)
        took += time.perf_counter() - started
        audio += len(pcm) / SAMPLE_RATE
        chars += len(text)
    return took / audio, audio / chars


def listener(entries: list[Entry]) -> dict[str, float]:
    """One listener who starts at the cast's first audio and plays in real time: when its first
    audio came (from the job's start of the run) and how long it stalled after that."""
    audio = [e for e in entries if isinstance(e.record, Audio)]
    start_ms = audio[0].ts
    heard_ms, stall_ms = start_ms, 0.0  # where playback is on the wall clock, before each chunk
    for e in audio:
        assert isinstance(e.record, Audio)
        if e.ts > heard_ms:  # needed before it was there
            stall_ms += e.ts - heard_ms
            heard_ms = e.ts
        heard_ms += e.record.d
    return {"first_audio_ms": start_ms, "stall_s": stall_ms / 1000}


async def overload(redis: Redis, synth: Any, voice: str) -> dict[str, Any]:
    """The five casts through a fresh worker; per listener figures."""
    await redis.flushdb()
    store, reader = CastStore(redis), LogReader(redis)
    cfg = replace(SynthConfig.from_env(), consumer="overload")  # SYNTH_* apply
    worker = Worker(cfg, redis, synth)
    ids = []
    began = castlog.now_ms()
    for opening in OPENINGS:
        text = f"{opening} part. {PARAGRAPH}"
        cast_id = castlog.content_id(text, voice)
        meta = Meta(title=opening, voice=voice, chars=len(text), sentences=chunking.count_chunks(text), created_at=0)
        await store.submit(cast_id, text, voice, meta)
        ids.append(cast_id)
    task = asyncio.create_task(worker.run())
    try:
        while True:
            lasts = [await reader.last(cid, bodies=False) for cid in ids]
            if all(e is not None and castlog.is_terminal(e.record) for e in lasts):
                break
            await asyncio.sleep(0.5)
    finally:
        worker.stop()
        await task
    rows = []
    for cast_id in ids:
        entries, _ = await reader.read_all(cast_id)
        row = listener(entries)
        row["first_audio_s"] = (row.pop("first_audio_ms") - began) / 1000
        start = next(e.ts for e in entries if isinstance(e.record, Start))
        notes = [(e.ts, e.record.eta_ms) for e in entries if isinstance(e.record, Queued) and e.record.eta_ms >= 0]
        if notes:
            first_audio = next(e.ts for e in entries if isinstance(e.record, Audio))
            row["noted_eta_s"] = notes[0][1] / 1000  # the first estimate it was told
            row["true_wait_s"] = (first_audio - notes[0][0]) / 1000
            # every note's estimate against the truth from that note: how far off, in the median
            row["estimate_error_s"] = statistics.median(abs(ts + eta - first_audio) / 1000 for ts, eta in notes)
        row["waited_for_start_s"] = (start - began) / 1000
        rows.append(row)
    stalls = [r["stall_s"] for r in rows]
    return {
        "listeners": rows,
        "worst_stall_s": max(stalls),
        "total_stall_s": sum(stalls),
        "last_first_audio_s": max(r["first_audio_s"] for r in rows),
        "median_first_audio_s": statistics.median(r["first_audio_s"] for r in rows),
    }


async def run(synth: Any, voice: str) -> dict[str, Any]:
    with temp_redis() as server:
        redis = Redis.from_url(server.url)
        try:
            return await overload(redis, synth, voice)
        finally:
            await redis.aclose()


def report(run: dict[str, Any]) -> None:
    print()
    for n, r in enumerate(run["listeners"], 1):
        told = (f", first told {r['noted_eta_s']:.1f} s, waited {r['true_wait_s']:.1f} s, "
                f"notes off by {r['estimate_error_s']:.1f} s (median)" if "noted_eta_s" in r else "")
        print(f"  listener {n}: first audio {r['first_audio_s']:6.1f} s, stall after it {r['stall_s']:5.1f} s{told}")
    print()
    print_rows({
        "worst stall (s)": run["worst_stall_s"], "total stall (s)": run["total_stall_s"],
        "median first audio (s)": run["median_first_audio_s"], "last first audio (s)": run["last_first_audio_s"],
    }, 40)
    print_target(f"every listener <= {STALL_TARGET_S:g} s of stall in all", run["worst_stall_s"] <= STALL_TARGET_S)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--real", action="store_true", help="the real model, not a stand-in")
    parser.add_argument("--rtf", type=float, default=None,
                        help="the stand-in's real-time factor instead of the one measured now (a quieter machine's)")
    args = parser.parse_args()
    print("loading the model (onnx) ...", flush=True)
    real = load_synthesizer("onnx", threads=args.threads)
    real.warm_up()
    voice = "af_heart" if "af_heart" in real.voices() else real.voices()[0]
    rtf, per_char = measure_model(real, voice)
    print(f"the model here: RTF {rtf:.3f}, {per_char * 1000:.1f} ms of audio a character "
          f"(capacity {1 / rtf:.2f} audio s per s)", flush=True)
    paced_rtf = args.rtf or rtf
    synth: Any = real if args.real else Paced(paced_rtf, per_char, real.voices())
    what = "the real model" if args.real else f"a stand-in at RTF {paced_rtf:.3f}"
    print(f"running the five casts with {what} ...", flush=True)
    figures = asyncio.run(run(synth, voice))
    report(figures)
    payload = {
        "model": "real onnx" if args.real else "stand-in (a tone of the real model's length, paced)",
        "model_rtf": rtf, "run_rtf": rtf if args.real else paced_rtf, "audio_s_per_char": per_char,
        "threads": args.threads, "machine": machine(),
        "casts": len(OPENINGS), "chars_per_cast": len(PARAGRAPH) + len("Fifth part. "),
        "admit_headroom": SynthConfig.from_env().admit_headroom, "capacity": figures,
    }
    name = "overload_real" if args.real else "overload" if args.rtf is None else f"overload_rtf{args.rtf:g}"
    path = RESULTS / f"{name}.json"
    write_results(path, payload)
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
