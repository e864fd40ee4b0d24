"""Barge-in: a live session's ``cancel`` -> the last audio byte and the cast's end, against one
chunk's model time.

The live path as deployed (intake as its own process, Redis, the worker with its schedule and MP3
encoder, the WebSocket) with a paced stand-in model whose every chunk takes ``--rtf`` times its
audio's duration, timed per call. Each trial streams a long answer and cancels on the k-th
sentence's audio (k = 1, 2, 3, ...). A cancel drops every chunk not yet in the log (the chunk in
hand finishes on the model thread and is thrown away), so the audio stops at once and the cast
ends (``done``) without waiting for the model. Target: the last audio byte within one chunk's
model time of the cancel (the median chunk's), in every trial. The real model's figure comes
from ``tests/system/test_cancel.py`` (it prints it).

    python bench/bench_cancel.py [--trials 6] [--rtf 0.3]      (under a minute)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import aiohttp
from bench_live import VOICE, PacedModel

import castlog
import chunking
import servicekit
from synth.config import SynthConfig
from synth.worker import Worker

from common import RESULTS, arguments, print_rows, print_target, repo_text, services, temp_redis, write_results

TEXT = " ".join(chunking.split_text(repo_text("article"))[:12])


async def trial(http: aiohttp.ClientSession, url: str, model: PacedModel, cancel_on: int) -> dict[str, float]:
    """One session cancelled on its ``cancel_on``-th sentence's audio."""
    async with http.ws_connect(url) as ws:
        await ws.send_json({"type": "start", "voice": VOICE})
        await ws.receive()  # cast
        await ws.send_json({"type": "text", "text": TEXT})
        frames, cancelled_at, last_at, heard_after, done_at = 0, 0.0, 0.0, 0, 0.0
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.BINARY:
                frames += 1
                last_at = time.monotonic()
                heard_after += 1 if cancelled_at else 0
                if frames == cancel_on:
                    await ws.send_json({"type": "cancel"})
                    cancelled_at = last_at
            elif json.loads(msg.data)["type"] == "done":
                done_at = time.monotonic()
                break
    chunk_s = statistics.median(model.seconds.values())
    wait = last_at - cancelled_at
    return {"cancel_on": cancel_on, "last_byte_s": wait, "done_s": done_at - cancelled_at, "chunk_model_s": chunk_s,
            "ratio": wait / chunk_s, "sentences": frames, "heard_after": heard_after}


async def run(args: argparse.Namespace) -> dict[str, object]:
    model = PacedModel(args.rtf)
    with temp_redis() as redis_server:
        async with services(redis_server.url, ["intake"], INTAKE_RATE="1000", INTAKE_BURST="1000") as ports:
            redis = servicekit.client_for(redis_server.url)
            await castlog.publish_voices(redis, castlog.VoiceList(voices=(VOICE,), default=VOICE), maxlen=100)
            worker = Worker(SynthConfig(consumer="bench", poll_s=0.1), redis, model)
            task = asyncio.ensure_future(worker.run())
            url = f"ws://127.0.0.1:{ports['intake']}/v1/audio/speech/live"
            try:
                async with aiohttp.ClientSession() as http:
                    trials = [await trial(http, url, model, 1 + k % 4) for k in range(args.trials)]
            finally:
                worker.stop()
                await asyncio.wait_for(task, 60)
                await redis.aclose()
    ratios = [t["ratio"] for t in trials]
    return {"rtf": args.rtf, "trials": trials, "median_ratio": statistics.median(ratios), "max_ratio": max(ratios),
            "max_done_s": max(t["done_s"] for t in trials), "met": max(ratios) <= 1.0}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--rtf", type=float, default=0.3)
    args = parser.parse_args()
    results = asyncio.run(run(args))
    for t in results["trials"]:  # type: ignore[attr-defined]
        print_rows({f"cancel on sentence {t['cancel_on']:g}": f"last byte {t['last_byte_s']:.3f} s after it, "
                    f"done {t['done_s']:.3f} s; a chunk's model time {t['chunk_model_s']:.3f} s: ratio "
                    f"{t['ratio']:.2f}; {t['heard_after']:g} chunk(s) heard after"}, 24)
    print_rows({"median ratio": results["median_ratio"], "max ratio": results["max_ratio"],
                "max cancel -> done (s)": results["max_done_s"]}, 24)
    print_target("cancel -> last audio byte within one chunk's model time", bool(results["met"]))
    write_results(RESULTS / "cancel.json", results)


if __name__ == "__main__":
    main()
