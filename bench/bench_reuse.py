"""Reuse of chunks across casts (the chunk cache), and a live turn's gaps, with the real model, side
by side in one run (one model loaded once, onnx, a throwaway Redis, one in-process worker):

1. an edit: a 14-sentence text, then the same text with one middle sentence reworded: the
   edited cast's time to done and time to first audio ÷ the first cast's (both from just before
   the submit). Target: done well under one half.
2. a stock phrase opening three live turns ("Sure, let me check that for you." then an answer of
   its own): the second and third turns' first audio ÷ the first's (from just before the text
   is written).
3. the cost of a chunk cache lookup that misses (the median of many) ÷ one chunk's model time.
4. a live turn of long sentences written at once: the largest gap between its audio records ÷
   one sentence's model time, with ``SYNTH_LIVE_GAP_S`` at its default and without it (a gap as
   long as any sentence), the chunk cache off for both; with the real model, and with a
   stand-in at RTF 0.9 (the real model on a loaded CPU may not keep up, and then no cut helps).

    nice python bench/bench_reuse.py [--threads 2] [--model-dir DIR]     (a few minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from dataclasses import replace
from typing import Any

from logfollow import follow

import castlog
import chunking
import servicekit
from castlog import Audio, CastStore, Entry, LiveStore, LogReader, Meta
from synth.cast import heads
from synth.chunkcache import ChunkCache, chunk_key
from synth.config import SynthConfig
from synth.model import Synthesizer, load_synthesizer
from synth.worker import Worker

from common import RESULTS, ToneModel, arguments, machine, print_rows, print_target, temp_redis, write_results

VOICE = "af_heart"
FOURTEEN = [
    "The town woke slowly under a pale winter sky.",
    "Smoke rose from the chimneys along the river.",
    "Children ran down the lane with their satchels.",
    "The old postman stopped to talk with the baker.",
    "Nobody was in a hurry that morning.",
    "By nine the market square was full of stalls.",
    "A man with a fiddle played three old tunes.",
    "The mayor walked past and nodded to everyone.",
    "Later the clouds broke and the roofs shone.",
    "The fishermen came back at noon with light nets.",
    "Still, there was enough fish for supper.",
    "In the afternoon the wind turned to the sea.",
    "When the lamps were lit, the square emptied.",
    "Only the baker stayed up, kneading the bread.",
]
EDITED = {7: "The mayor strolled by with his dog and greeted everybody."}
STOCK = "Sure, let me check that for you."
ANSWERS = ["Your order left the warehouse today.", "The store opens at nine tomorrow.",
           "Your table is booked for seven."]
LONG_TURN = (
    "The order you placed on Monday left our warehouse this morning and should reach the depot in your town "
    "by Thursday afternoon at the latest. Once it arrives there, a driver will call you about an hour before "
    "delivery so that somebody can be at home to sign for the parcel. If nobody is in, the driver leaves a card "
    "with a number to call, and you can pick the parcel up from the depot within the next seven days."
)
LOOKUPS = 500
TONE_RTF = 0.9  # a model barely faster than real time: the ramp's hardest case
TONE_CHARS_PER_S = 16  # the stand-in's speech, as Kokoro reads English prose
Row = dict[str, Any]


def first_audio_ms(entries: list[Entry]) -> int:
    return next(e.ts for e in entries if isinstance(e.record, Audio))


async def wait_terminal(reader: LogReader, cast_id: str) -> list[Entry]:
    async for entry in follow(reader, cast_id, block_ms=1000):
        if castlog.is_terminal(entry.record):
            break
    return await reader.read(cast_id, 0, 10_000)


async def whole_cast(store: CastStore, reader: LogReader, text: str) -> tuple[float, float, int]:
    """(first audio s, done s, chunks reused) of a new cast of ``text``, from just before its submit."""
    cast_id = castlog.content_id(text, VOICE)
    meta = Meta(title="bench", voice=VOICE, chars=len(text), sentences=chunking.count_chunks(text), created_at=0)
    started_ms = time.time() * 1000
    await store.submit(cast_id, text, VOICE, meta)
    entries = await wait_terminal(reader, cast_id)
    state = castlog.summarize(entries)
    return (first_audio_ms(entries) - started_ms) / 1000, (entries[-1].ts - started_ms) / 1000, state.reused


async def live_turn(live: LiveStore, reader: LogReader, text: str) -> tuple[float, list[Entry]]:
    """(first audio s from just before the text is written, the log) of an open cast given ``text`` at once."""
    cast_id = (await live.open(VOICE, Meta(title="turn", voice=VOICE, chars=0, sentences=0, created_at=0,
                                           live=True))).cast_id
    started_ms = time.time() * 1000
    answer, _ = await live.append_text(cast_id, 0, len(text), text, max_chars=100_000)
    assert answer == "ok", answer
    await live.close_text(cast_id, VOICE)
    entries = await wait_terminal(reader, cast_id)
    return (first_audio_ms(entries) - started_ms) / 1000, entries


def largest_gap_s(entries: list[Entry]) -> float:
    stamps = [e.ts for e in entries if isinstance(e.record, Audio)]
    return max((b - a for a, b in zip(stamps, stamps[1:])), default=0) / 1000


def model_s(synth: Synthesizer, text: str) -> float:
    started = time.perf_counter()
    synth.synthesize(text, VOICE)
    return time.perf_counter() - started


class Bench:
    def __init__(self, synth: Synthesizer, redis: Any) -> None:
        self.synth, self.redis = synth, redis
        self.store, self.reader, self.live = CastStore(redis), LogReader(redis), LiveStore(redis)

    async def with_worker(self, cfg: SynthConfig, part: Any, synth: Synthesizer | None = None) -> Any:
        worker = Worker(cfg, self.redis, synth or self.synth)
        task = asyncio.ensure_future(worker.run())
        try:
            return await part()
        finally:
            worker.stop()
            await asyncio.wait_for(task, 120)

    async def edit(self) -> Row:
        first = await self.whole(FOURTEEN)
        edited = await self.whole([EDITED.get(k, s) for k, s in enumerate(FOURTEEN)])
        return {"first": first, "edited": edited, "done_ratio": edited[1] / first[1],
                "first_audio_ratio": edited[0] / first[0]}

    async def whole(self, sentences: list[str]) -> tuple[float, float, int]:
        return await whole_cast(self.store, self.reader, " ".join(sentences))

    async def stock(self) -> Row:
        firsts = [(await live_turn(self.live, self.reader, f"{STOCK} {answer}"))[0] for answer in ANSWERS]
        return {"first_audio_s": firsts, "second_ratio": firsts[1] / firsts[0], "third_ratio": firsts[2] / firsts[0]}

    async def lookup(self) -> Row:
        cache = ChunkCache(self.redis, budget=1 << 20)
        costs = []
        for n in range(LOOKUPS):
            key = chunk_key("bench", f"never made {n}", VOICE, 1.0, "", "")
            started = time.perf_counter()
            assert await cache.get(key) is None
            costs.append(time.perf_counter() - started)
        # a long sentence misses once per head the ramp could have cut it to (synth.cast.heads)
        sentence = chunking.split_text(LONG_TURN)[1]
        every_head = []
        for _ in range(LOOKUPS // 10):
            started = time.perf_counter()
            for head in heads(sentence):
                assert await cache.get(chunk_key("bench", head, VOICE, 1.0, "", "")) is None
            every_head.append(time.perf_counter() - started)
        chunk_s = statistics.median([await asyncio.to_thread(model_s, self.synth, s) for s in FOURTEEN[:3]])
        miss_s, heads_s = statistics.median(costs), statistics.median(every_head)
        sentence_s = await asyncio.to_thread(model_s, self.synth, sentence)
        return {"miss_ms": miss_s * 1000, "chunk_model_s": chunk_s, "ratio": miss_s / chunk_s,
                "heads": len(heads(sentence)), "heads_miss_ms": heads_s * 1000,
                "sentence_model_s": sentence_s, "heads_ratio": heads_s / sentence_s}

    async def gaps(self) -> Row:
        _, entries = await live_turn(self.live, self.reader, LONG_TURN)
        return {"largest_gap_s": largest_gap_s(entries), "chunks": sum(isinstance(e.record, Audio) for e in entries)}


async def run(synth: Synthesizer, gaps_only: bool = False) -> dict[str, Row]:
    with temp_redis() as server:
        redis = servicekit.client_for(server.url)
        bench = Bench(synth, redis)
        cfg = SynthConfig(consumer="bench", poll_s=0.1)
        results: dict[str, Row] = {}
        try:
            async def cached() -> None:
                for name, part in (("edit", bench.edit), ("stock", bench.stock), ("lookup", bench.lookup)):
                    results[name] = await part()
                    print(name, results[name], flush=True)

            if not gaps_only:
                await bench.with_worker(cfg, cached)
            sentence_s = statistics.median(
                [await asyncio.to_thread(model_s, synth, s) for s in chunking.split_text(LONG_TURN)[1:]])
            tone = ToneModel(TONE_RTF, 1000 / TONE_CHARS_PER_S, VOICE)
            tone_s = statistics.median(TONE_RTF * len(s) / TONE_CHARS_PER_S for s in chunking.split_text(LONG_TURN)[1:])
            for name, gap_s in (("with_gap", cfg.live_gap_s), ("without_gap", 1e6)):
                off = replace(cfg, chunk_cache_bytes=0, live_gap_s=gap_s)
                row = await bench.with_worker(off, bench.gaps)
                results[name] = {**row, "sentence_model_s": sentence_s, "ratio": row["largest_gap_s"] / sentence_s}
                row = await bench.with_worker(off, bench.gaps, tone)
                results[f"tone_{name}"] = {**row, "sentence_model_s": tone_s, "ratio": row["largest_gap_s"] / tone_s}
                print(name, results[name], results[f"tone_{name}"], flush=True)
        finally:
            await redis.aclose()
    return results


def report(r: dict[str, Row]) -> None:
    if "edit" in r:
        report_reuse(r)
    print("\n4. a live turn's largest gap between audio records ÷ one sentence's model time")
    print(f"(tone_: a stand-in model at RTF {TONE_RTF}, a tone of 1/16 s a character)")
    for name in ("with_gap", "without_gap", "tone_with_gap", "tone_without_gap"):
        row = r[name]
        print_rows({f"{name}: largest gap (s), chunks": f"{row['largest_gap_s']:.2f}, {row['chunks']}",
                    f"{name}: gap / sentence ({row['sentence_model_s']:.2f} s)": row["ratio"]}, 42)
    print_target("the largest live gap under 3 s (Pipecat's wait) at RTF 0.9", r["tone_with_gap"]["largest_gap_s"] < 3.0)


def report_reuse(r: dict[str, Row]) -> None:
    edit, stock, lookup = r["edit"], r["stock"], r["lookup"]
    print("\n1. a 14-sentence text, then one middle sentence reworded (from just before the submit)")
    print_rows({"first cast: first audio, done (s)": f"{edit['first'][0]:.2f}, {edit['first'][1]:.2f}",
                "edited: first audio, done (s), reused": f"{edit['edited'][0]:.2f}, {edit['edited'][1]:.2f}, "
                                                         f"{edit['edited'][2]}",
                "done: edited / first": edit["done_ratio"], "first audio: edited / first": edit["first_audio_ratio"]}, 42)
    print_target("done ratio well under one half (< 0.3)", edit["done_ratio"] < 0.3)
    print("\n2. a stock phrase opening three live turns")
    print_rows({"first audio of turns 1, 2, 3 (s)": ", ".join(f"{s:.2f}" for s in stock["first_audio_s"]),
                "turn 2 / turn 1": stock["second_ratio"], "turn 3 / turn 1": stock["third_ratio"]}, 42)
    print("\n3. a chunk cache lookup that misses")
    print_rows({"miss (ms, median)": lookup["miss_ms"], "one chunk's model time (s)": lookup["chunk_model_s"],
                "miss / chunk": f"{lookup['ratio']:.5f}",
                f"a long sentence's {lookup['heads']} heads, all missing (ms)": lookup["heads_miss_ms"],
                "those / its model time": f"{lookup['heads_ratio']:.5f}"}, 42)


def main() -> None:
    parser: argparse.ArgumentParser = arguments(__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model-dir", default=os.environ.get("KOKORO_MODEL_DIR"),
                        help="a Kokoro-82M folder with the English voices (default: $KOKORO_MODEL_DIR)")
    parser.add_argument("--gaps-only", action="store_true", help="part 4 alone")
    args = parser.parse_args()
    print("loading the model (onnx) ...", flush=True)
    synth = load_synthesizer("onnx", threads=args.threads, model_dir=args.model_dir)
    synth.warm_up()
    results = asyncio.run(run(synth, args.gaps_only))
    report(results)
    write_results(RESULTS / ("reuse_gaps.json" if args.gaps_only else "reuse.json"), {"results": results, "threads": args.threads, "machine": machine()})
    print(f"\nwritten to {RESULTS}")


if __name__ == "__main__":
    main()
