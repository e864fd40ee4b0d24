"""First audio against the model's own time for the first chunk, timed as a client times it.

Each source tree compared (this checkout, and with ``--base DIR`` another one side by side, e.g.
main's: ``git archive main libs services | tar -x -C DIR``) gets a throwaway Redis, intake and
edge as processes (``python -m intake``, ``python -m edge``) and a real synth ``Worker`` in a
process of its own, traced (``latencytrace.py``): each loads the int8 ONNX model (``--threads``).
A client POSTs to intake and follows the cast from edge, by SSE and by ``audio.mp3`` at once.
Rounds alternate the trees, and each request is measured side by side with the model alone (in
this process, right after it) on what the worker's model read for its first chunk, because other
load on the machine moves both by tens of percent: medians of the ratios.

1. five lone short texts ("Hello there, Ingrid Holm." ...), each its own one-chunk cast: first
   audio (from just before the POST to the first SSE audio event, and to the first byte of
   ``audio.mp3``) / the model's time for that chunk, G2P included (target <= 1.05), with a
   per-stage trace timed from the POST: intake (the HTTP submit and its claim script, POST to
   the job in Redis), the job's read in synth, admission, the pick, the chunk-in-hand write, the
   way to the model thread, G2P, the model, hand-off, encoder, append, edge's wake to the first
   SSE event and to the first MP3 byte; the same first audio over the worker's own model
   time for that chunk (the trace's: the machine's load cannot move between the two); a cast is
   deleted after its round, so that the next round's is new again;
2. a paragraph (texts/paragraph.txt): first audio / model time of its first clause (target <= 1.2);
3. throughput (each tree): the model alone on a paragraph's chunks / the worker on that cast,
   POST to its last audio (target >= 0.95; the worker also reads the words around a seam).

Several new casts at once, and the stall each listener hears as a client, are
bench/bench_overload.py's (the log's view and the client's, side by side in one run).

    python bench/bench_latency.py [--threads 2] [--rounds 3] [--parts 123] [--base DIR]
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, ClientTimeout
from jobstreams import read_jobs
from listening import english_model_dir
from redis.asyncio import Redis

import castlog
import chunking
import servicekit
from synth.dispatcher import infer
from synth.model import Synthesizer, load_synthesizer

from common import READY_S, RESULTS, arguments, repo_text, services, temp_redis, write_results
from latencytrace import VOICE, read_stamps, run_worker

SHORT_TEXTS = (
    "Hello there, Ingrid Holm.",
    "Your table for two is ready.",
    "The train to Oslo leaves at nine.",
    "Good morning, Dr. Okafor.",
    "Please check the front door.",
)
PARAGRAPH = repo_text("paragraph").strip()
# The ratios of part 1 and 2: first audio (SSE, MP3) over the model alone, right after, on what
# the worker's model read, and over the worker's own model time for it (the trace's: no load
# moved between the two).
RATIOS = {
    "sse": "first SSE audio / model alone on its first chunk",
    "mp3": "first MP3 byte / model alone on its first chunk",
    "sse-own": "first SSE audio / the worker's model time for it",
    "mp3-own": "first MP3 byte / the worker's model time for it",
}
# How long a finished cast's job may take to be acknowledged before its keys are deleted.
ACK_WAIT_S = 10.0
Row = dict[str, object]


def first_chunk(text: str) -> str:
    return chunking.split_text(text)[0]


# ---- a stack per source tree ------------------------------------------------------------------


@dataclass
class Stack:
    name: str
    redis: Redis
    intake: str  # base URLs
    edge: str
    trace: Path
    read_to: int = 0  # how far the trace file has been read


@asynccontextmanager
async def stack(name: str, tree: Path | None, threads: int, folder: Path) -> AsyncIterator[Stack]:
    """Redis, the traced worker, intake and edge, all from ``tree`` (None: this checkout)."""
    env = {} if tree is None else {"PYTHONPATH": os.pathsep.join(str(tree / p) for p in ("libs", "services"))}
    trace = folder / f"{name}.jsonl"
    trace.touch()
    with temp_redis() as server:
        worker = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--worker", str(trace), "--redis", server.url, "--threads", str(threads),
            env=dict(os.environ, **env), stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
        )
        try:
            assert worker.stdout is not None
            if (await asyncio.wait_for(worker.stdout.readline(), READY_S)).strip() != b"ready":
                raise SystemExit(f"{name}: the traced worker did not start")
            knobs = {"INTAKE_RATE": "1000", "INTAKE_BURST": "1000", "EDGE_READ_RATE": "1000", "EDGE_READ_BURST": "1000"}
            async with services(server.url, ["intake", "edge"], quiet=True, **env, **knobs) as ports:
                redis = servicekit.client_for(server.url)
                try:
                    base = "http://127.0.0.1:{}"
                    yield Stack(name, redis, base.format(ports["intake"]), base.format(ports["edge"]), trace,
                                trace.stat().st_size)
                finally:
                    await redis.aclose()
        finally:
            if worker.returncode is None:
                worker.terminate()
            await worker.wait()


# ---- a client -----------------------------------------------------------------------------------


@dataclass
class Heard:
    """What one client saw (time.time()): when it sent, when intake answered, each SSE audio
    record's arrival with its duration, and the first byte of ``audio.mp3``."""

    cast_id: str = ""
    sent: float = 0.0
    answered: float = 0.0
    audio: list[tuple[float, int]] = field(default_factory=list)  # (arrival, duration ms)
    first_mp3: float = 0.0

    @property
    def first_audio_s(self) -> float:
        return self.audio[0][0] - self.sent

    @property
    def first_mp3_s(self) -> float:
        return self.first_mp3 - self.sent


async def follow(http: ClientSession, url: str, on_audio: Callable[[float, dict[str, Any]], None]) -> None:
    """Read the SSE stream at ``url`` until `eos` or `error`."""
    async with http.get(url) as response:
        event = ""
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "audio":
                on_audio(time.time(), json.loads(line[5:]))
            elif line.startswith("data:") and event in ("eos", "error"):
                return


async def first_byte(http: ClientSession, url: str) -> float:
    """When the first byte of the body at ``url`` arrived."""
    async with http.get(url) as response:
        await response.content.readany()
        return time.time()


async def listen(st: Stack, http: ClientSession, text: str) -> Heard:
    """One client: POST the text to intake, then follow its cast from edge (SSE until `eos`, and
    the first byte of its MP3)."""
    heard = Heard()
    heard.sent = time.time()
    async with http.post(f"{st.intake}/api/casts", json={"text": text, "voice": VOICE, "title": "bench"}) as r:
        heard.cast_id = (await r.json())["id"]
        heard.answered = time.time()
    cast = f"{st.edge}/api/casts/{heard.cast_id}"
    mp3 = asyncio.create_task(first_byte(http, f"{cast}/audio.mp3"))
    try:
        await follow(http, f"{cast}/events", lambda at, record: heard.audio.append((at, int(record["headers"]["d"]))))
        heard.first_mp3 = await mp3
    finally:
        mp3.cancel()
    if not heard.audio:
        raise RuntimeError(f"cast {heard.cast_id} ended without audio")
    return heard


async def forget(st: Stack, cast_id: str) -> None:
    """Once its job is acknowledged, delete the cast, so that the same text is new again."""
    deadline = time.monotonic() + ACK_WAIT_S
    while (await st.redis.xpending(castlog.JOBS, castlog.GROUP))["pending"] and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await st.redis.delete(castlog.cast_key(cast_id), castlog.catalog_key(cast_id))


def stages(st: Stack, heard: Heard, chunk: str, enqueued: float) -> tuple[dict[str, float], str]:
    """The first chunk's way, in ms per stage, from the client's POST to its first audio; and
    the text the worker's model read for it (the chunk, and the next words where its sentence
    goes on: see synth.seams)."""
    stamps, st.read_to = read_stamps(st.trace, st.read_to)
    cast = stamps[heard.cast_id]
    read, model = next((k, s) for k, s in stamps.items() if k.startswith(chunk) and s.get("model", 0) >= cast["admitted"])
    held = min((s for k, s in stamps.items() if k.startswith("hold-") and s["hold"] >= cast["admitted"]),
               key=lambda s: s["hold"])
    encoded = min((s for k, s in stamps.items() if k.startswith("encode-") and s["encode"] >= model["model_done"]),
                  key=lambda s: s["encode"])
    points = [
        ("intake (POST to job)", heard.sent, enqueued),
        ("job read", enqueued, cast["read"]),
        ("admission", cast["read"], cast["admitted"]),
        ("pick", cast["admitted"], held["hold"]),
        ("hold (chunk in hand)", held["hold"], held["held"]),
        ("to the model thread", held["held"], model["model"]),
        ("G2P", model["model"], model.get("g2p_done", model["model"])),
        ("model", model.get("g2p_done", model["model"]), model["model_done"]),
        ("hand-off", model["model_done"], encoded["encode"]),
        ("encoder", encoded["encode"], encoded["encoded"]),
        ("append", encoded["encoded"], cast["appended"]),
        ("edge: append to SSE audio", cast["appended"], heard.audio[0][0]),
        ("edge: append to MP3 byte", cast["appended"], heard.first_mp3),
    ]
    out = {name: round(1000 * (b - a), 1) for name, a, b in points}
    out["first SSE audio"] = round(1000 * heard.first_audio_s, 1)
    out["first MP3 byte"] = round(1000 * heard.first_mp3_s, 1)
    out["model (G2P included)"] = round(1000 * (model["model_done"] - model["model"]), 1)
    out["outside the model (MP3)"] = round(out["first MP3 byte"] - out["model (G2P included)"], 1)
    return out, read


# ---- the parts ------------------------------------------------------------------------------------


class Bench:
    def __init__(self, synth: Synthesizer, stacks: Sequence[Stack], rounds: int) -> None:
        self.synth, self.stacks, self.rounds = synth, stacks, rounds
        self.serial = 0

    def unique(self, text: str) -> str:
        self.serial += 1
        return f"{text} This is take {self.serial} of {int(time.time())}."

    def model_s(self, chunk: str) -> float:
        started = time.perf_counter()
        infer(self.synth, chunk, VOICE)  # the worker's call
        return time.perf_counter() - started

    async def one(self, st: Stack, text: str) -> tuple[float, float, float, dict[str, float]]:
        """(first SSE audio s, first MP3 byte s, model s of its first chunk, trace) for one text;
        the model alone reads what the worker's model read for it, right after (side by side)."""
        async with ClientSession(timeout=ClientTimeout(300)) as http:
            heard = await listen(st, http, text)
        jobs = await read_jobs(st.redis)
        enqueued = next(job.enqueued_at for job in reversed(jobs) if job.id == heard.cast_id) / 1000
        await forget(st, heard.cast_id)
        trace, read = stages(st, heard, first_chunk(text), enqueued)
        return heard.first_audio_s, heard.first_mp3_s, self.model_s(read), trace

    async def first_audio(self, name: str, texts: Sequence[str], target: float) -> tuple[list[Row], dict[str, Any]]:
        """Each text in each tree, alternating, ``rounds`` times: the median ratios and stages."""
        ratios: dict[str, dict[str, list[float]]] = {st.name: {k: [] for k in RATIOS} for st in self.stacks}
        traces: dict[str, list[dict[str, float]]] = {st.name: [] for st in self.stacks}
        for n in range(self.rounds):
            for text in texts:
                for st in self.stacks[:: 1 if n % 2 == 0 else -1]:
                    sse, mp3, model, trace = await self.one(st, text)
                    own = trace["model (G2P included)"] / 1000
                    for key, ratio in zip(RATIOS, (sse / model, mp3 / model, sse / own, mp3 / own)):
                        ratios[st.name][key].append(ratio)
                    traces[st.name].append({"model alone": round(1000 * model, 1), **trace})
                    print(f"  {name} [{st.name}] {first_chunk(text)!r}: first audio {sse:.3f} s (MP3 {mp3:.3f} s), "
                          f"model alone {model:.3f} s, in the worker {own:.3f} s -> {sse / model:.3f} "
                          f"({mp3 / model:.3f}), {sse / own:.3f} ({mp3 / own:.3f})", flush=True)
        rows, medians = [], {}
        for st in self.stacks:
            medians[st.name] = {k: statistics.median(t[k] for t in traces[st.name]) for k in traces[st.name][0]}
            for key, what in RATIOS.items():
                rows.append(row(f"{name} [{st.name}]: {what}", statistics.median(ratios[st.name][key]), target, "<="))
        return rows, {"median ms": medians, "each": traces}

    async def throughput(self, text: str) -> list[Row]:
        ratios: dict[str, list[float]] = {st.name: [] for st in self.stacks}
        for n in range(self.rounds):
            for st in self.stacks[:: 1 if n % 2 == 0 else -1]:
                body = self.unique(text)
                started = time.perf_counter()
                for chunk in chunking.split_text(body):
                    infer(self.synth, chunk, VOICE)  # the worker's call
                model = time.perf_counter() - started
                async with ClientSession(timeout=ClientTimeout(600)) as http:
                    heard = await listen(st, http, body)
                worker = heard.audio[-1][0] - heard.sent
                ratios[st.name].append(model / worker)
                print(f"  throughput [{st.name}]: model {model:.2f} s, worker {worker:.2f} s -> {model / worker:.2f}",
                      flush=True)
        return [row(f"throughput [{name}]: model alone / worker (POST to last audio)", statistics.median(r), 0.95, ">=")
                for name, r in ratios.items()]


def row(what: str, ratio: float, target: float, sense: str) -> Row:
    met = ratio <= target if sense == "<=" else ratio >= target
    return {"what": what, "ratio": round(ratio, 3), "target": f"{sense} {target}", "met": met}


async def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parts", default="123", help="which parts to run, e.g. 12")
    parser.add_argument("--base", type=Path, help="a source tree (libs/, services/) to run side by side")
    parser.add_argument("--out", type=Path, default=RESULTS / "latency.json")
    parser.add_argument("--worker", type=Path, help=argparse_internal())
    parser.add_argument("--redis", help=argparse_internal())
    args = parser.parse_args()
    if args.worker is not None:  # this script, started by itself as one tree's traced worker
        await run_worker(args.worker, args.redis, args.threads)
        return
    # a client that stops following mid-stream is normal here: not an error worth a traceback
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        synth = load_synthesizer("onnx", model_dir=str(english_model_dir()), cache_dir=str(Path(tmp) / "cache"),
                                 threads=args.threads)
        synth.warm_up()
        async with AsyncExitStack() as stacks:
            trees = [("now", None)] + ([("base", args.base.resolve())] if args.base else [])
            running = [await stacks.enter_async_context(stack(n, t, args.threads, Path(tmp))) for n, t in trees]
            bench = Bench(synth, running, args.rounds)
            rows: list[Row] = []
            traces: dict[str, Any] = {}
            for part, name, texts, target in (("1", "short text", SHORT_TEXTS, 1.05), ("2", "paragraph", (PARAGRAPH,), 1.2)):
                if part in args.parts:
                    got, traces[name] = await bench.first_audio(name, texts, target)
                    rows += got
                    for tree, medians in traces[name]["median ms"].items():
                        print(f"  {name} [{tree}], per stage (median ms): "
                              + ", ".join(f"{k} {v:g}" for k, v in medians.items()))
            if "3" in args.parts:
                rows += await bench.throughput(" ".join(chunking.split_text(PARAGRAPH)[:3]))
    print()
    for r in rows:
        print(f"{'ok ' if r['met'] else 'MISS'} {r['ratio']:>7} (target {r['target']})  {r['what']}")
    write_results(args.out, {"rows": rows, "traces": traces, "threads": args.threads})


def argparse_internal() -> str:
    return "(internal: the traced worker's own command line)"


if __name__ == "__main__":
    asyncio.run(main())
