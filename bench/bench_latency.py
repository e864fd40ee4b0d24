"""First audio against the model's own time for the first chunk, through the whole stack.

One run, one model loaded once (onnx, ``--threads``), a throwaway Redis, and every service in
this process on loopback: a client POSTs through the front proxy (streamtts up's) to intake and
follows the cast's SSE through the proxy from edge, while the synth worker makes it. Texts are
made unique per request (a numbered last sentence) so that nothing is cached; the first chunk
stays the same. Each ratio is measured side by side with the model alone on the same first
chunk, right before, because other load on the machine moves both by tens of percent.

1. one new short text (texts/short.txt): first audio at the client / model time of its first
   chunk (target <= 1.15), with a per-stage trace of that request: intake, queue read,
   admission, G2P, model, hand-off to the encoder, encoder, append, edge's wake-up, proxy;
2. one client, a paragraph (texts/paragraph.txt): first audio / model time of its first clause
   (target <= 1.2);
3. three new paragraphs submitted together: the latest client's first audio / the model time of
   one first clause (mean of the three; target <= 3.5); spread between the clients in first
   clause times (target <= 2); stall per client (audio arriving after a listener who started at
   the first audio ran dry) against the capacity bound (N x RTF - 1) x audio (target <= 1.1x,
   +0.5 s of slack for start-up);
4. throughput: the model alone on a paragraph's chunks / the worker on that cast, job to `eos`
   (target >= 0.95).

    python bench/bench_latency.py [--threads 2] [--rounds 3] [--quick]
"""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from aiohttp import ClientSession, ClientTimeout, web
from redis.asyncio import Redis

import castlog
import servicekit
import synth.lane as lane_module
from edge.app import create_app as create_edge
from edge.config import Config as EdgeConfig
from intake.app import create_app as create_intake
from intake.config import Config as IntakeConfig
from streamtts.proxy import Upstreams
from streamtts.proxy import create_app as create_proxy
from streamtts.redisserver import free_port, start_server
from synth.config import SynthConfig
from synth.dispatcher import infer
from synth.model import Synthesizer, Wrapped, load_synthesizer
from synth.model.base import Word
from synth.worker import Worker

from common import RESULTS, arguments, repo_text, write_results

SHORT = repo_text("short").strip()
PARAGRAPH = repo_text("paragraph").strip()
ARTICLE = repo_text("article").strip()
# Three paragraphs of different openings (a word cut, a clause, a sentence) for part 3.
THREE = (PARAGRAPH, ARTICLE.split("\n\n")[0], ARTICLE.split("\n\n")[2])
# The stall target's slack: start-up costs that no capacity bound counts (seconds).
STALL_SLACK_S = 0.5
Row = dict[str, object]


def voice_of(synth: Synthesizer) -> str:
    voices = synth.voices()
    return "af_heart" if "af_heart" in voices else voices[0]


def first_chunk(text: str) -> str:
    return castlog.split_text(text)[0]


# ---- the trace: the worker's stages, stamped with time.time() in this process ---------------


@dataclass
class Trace:
    """Stamps of the first chunk of each cast, by cast id (or chunk text for the model)."""

    stamps: dict[str, dict[str, float]] = field(default_factory=dict)

    def mark(self, key: str, stage: str) -> None:
        self.stamps.setdefault(key, {}).setdefault(stage, time.time())


class TracedSynth(Wrapped):
    """The real synthesizer, stamping each first chunk's way through the model on the path the
    worker takes (``synthesize_timed``: G2P and inference in one call, as in production)."""

    def __init__(self, real: Synthesizer, trace: Trace, firsts: set[str]) -> None:
        super().__init__(real)
        self.trace, self.firsts = trace, firsts

    def synthesize_timed(self, text: str, voice: str, speed: float = 1.0) -> tuple[npt.NDArray[np.float32], list[Word]]:
        traced = text in self.firsts
        if traced:
            self.trace.mark(text, "model")
        out = super().synthesize_timed(text, voice, speed)
        if traced:
            self.trace.mark(text, "model_done")
        return out


def trace_worker(worker: Worker, trace: Trace) -> None:
    """Stamp admission, the encoder and the append of each cast's first audio."""
    admit, append = worker.admitter.admit, worker.store.append_stamped  # the audio's appends
    encode = lane_module.encode_chunk

    async def traced_admit(job: Any) -> None:
        trace.mark(job.cast_id, "admit")
        await admit(job)
        trace.mark(job.cast_id, "admitted")

    def traced_encode(pcm: Any, *args: Any, **kwargs: Any) -> Any:
        stamp = time.time()
        out = encode(pcm, *args, **kwargs)
        trace.stamps.setdefault(f"encode-{len(pcm)}", {"encode": stamp, "encoded": time.time()})
        return out

    async def traced_append(cast_id: str, tail: int, records: list[Any]) -> castlog.Stamped:
        first = any(isinstance(r, castlog.Audio) and r.i == 0 for r in records)
        if first:
            trace.mark(cast_id, "append")
        stamped = await append(cast_id, tail, records)
        if first:
            trace.mark(cast_id, "appended")
        return stamped

    worker.admitter.admit = traced_admit  # type: ignore[method-assign]
    worker.store.append_stamped = traced_append  # type: ignore[method-assign]
    lane_module.encode_chunk = traced_encode  # type: ignore[assignment]


# ---- the stack ---------------------------------------------------------------------------------


@dataclass
class Stack:
    redis: Redis
    proxy: str  # base URLs
    edge: str
    worker: Worker
    trace: Trace
    firsts: set[str]


@asynccontextmanager
async def serve(app: web.Application, port: int) -> AsyncIterator[str]:
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def stack(synth: Synthesizer, redis_url: str, voice: str) -> AsyncIterator[Stack]:
    redis = servicekit.client_for(redis_url)
    await redis.flushall()
    trace, firsts = Trace(), set[str]()
    cfg = SynthConfig(consumer="bench", poll_s=0.05, concurrency=3)
    worker = Worker(cfg, redis, TracedSynth(synth, trace, firsts))  # type: ignore[arg-type]
    trace_worker(worker, trace)
    # as a worker's service does at start-up: intake takes only voices a worker has published
    await castlog.publish_voices(redis, castlog.VoiceList(voices=(voice,), default=voice), maxlen=100)
    intake_cfg = IntakeConfig(redis_url=redis_url, rate=1000.0, burst=1000, default_voice=voice)
    ports = [free_port() for _ in range(3)]
    async with serve(create_intake(intake_cfg), ports[0]) as intake, \
            serve(create_edge(EdgeConfig(redis_url=redis_url)), ports[1]) as edge, \
            serve(create_proxy(redis, Upstreams(intake=intake, edge=edge)), ports[2]) as proxy:
        task = asyncio.create_task(worker.run())
        try:
            yield Stack(redis, proxy, edge, worker, trace, firsts)
        finally:
            worker.stop()
            await task
            await redis.aclose()


# ---- a client -----------------------------------------------------------------------------------


@dataclass
class Heard:
    """What one client saw: when it sent, when intake answered, and each audio record's arrival
    (time.time()) with its duration, through the proxy; the first one also directly from edge."""

    cast_id: str = ""
    sent: float = 0.0
    answered: float = 0.0
    audio: list[tuple[float, int]] = field(default_factory=list)  # (arrival, duration ms)
    direct_first: float = 0.0

    @property
    def first_audio_s(self) -> float:
        return self.audio[0][0] - self.sent

    def stall_s(self) -> float:
        """How long a listener who started at the first audio waited for audio in all."""
        heard = waited = 0.0
        start = self.audio[0][0]
        for arrival, ms in self.audio:
            waited += max(0.0, arrival - start - heard - waited)
            heard += ms / 1000
        return waited


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


async def listen(st: Stack, http: ClientSession, text: str, voice: str, *, until_eos: bool = True) -> Heard:
    """One client: POST the text through the proxy, then follow its cast through the proxy (and
    directly from edge, for the proxy's share of the trace)."""
    heard = Heard()
    st.firsts.add(first_chunk(text))
    heard.sent = time.time()
    async with http.post(f"{st.proxy}/api/casts", json={"text": text, "voice": voice, "title": "bench"}) as r:
        heard.cast_id = (await r.json())["id"]
        heard.answered = time.time()
    path = f"/api/casts/{heard.cast_id}/events"
    got_first = asyncio.Event()

    def on_proxied(at: float, record: dict[str, Any]) -> None:
        heard.audio.append((at, int(record["headers"]["d"])))
        got_first.set()

    def on_direct(at: float, record: dict[str, Any]) -> None:
        heard.direct_first = heard.direct_first or at

    direct = asyncio.create_task(follow(http, st.edge + path, on_direct))
    proxied = asyncio.create_task(follow(http, st.proxy + path, on_proxied))
    try:
        if until_eos:
            await proxied
        else:
            first = asyncio.create_task(got_first.wait())
            await asyncio.wait([first, proxied], return_when=asyncio.FIRST_COMPLETED)
            first.cancel()
            if proxied.done():
                proxied.result()  # an error in the stream: raise it
        if not heard.audio:
            raise RuntimeError(f"cast {heard.cast_id} ended without audio")
    finally:
        for task in (direct, proxied):
            task.cancel()
        await asyncio.gather(direct, proxied, return_exceptions=True)
    return heard


async def enqueued_at(redis: Redis) -> dict[str, float]:
    return {job.id: job.enqueued_at / 1000 for job in await castlog.read_jobs(redis)}


def stages(st: Stack, heard: Heard, text: str, queued: float) -> dict[str, float]:
    """The first chunk's way, in ms per stage, from the client's POST to its first audio."""
    cast, model = st.trace.stamps[heard.cast_id], st.trace.stamps[first_chunk(text)]
    encoded = min(
        (s for k, s in st.trace.stamps.items() if k.startswith("encode-") and s["encode"] >= model["model_done"]),
        key=lambda s: s["encode"],
    )
    points = [
        ("intake (POST to job)", heard.sent, queued),
        ("queue read", queued, cast["admit"]),
        ("admission", cast["admit"], cast["admitted"]),
        ("pick", cast["admitted"], model["model"]),
        ("model (G2P included)", model["model"], model["model_done"]),
        ("hand-off", model["model_done"], encoded["encode"]),
        ("encoder", encoded["encode"], encoded["encoded"]),
        ("append", encoded["encoded"], cast["appended"]),
        ("edge wake-up", cast["appended"], heard.direct_first),
        ("proxy", heard.direct_first, heard.audio[0][0]),
    ]
    out = {name: round(1000 * (b - a), 1) for name, a, b in points}
    out["total (first audio)"] = round(1000 * heard.first_audio_s, 1)
    return out


# ---- the parts ------------------------------------------------------------------------------------


class Bench:
    def __init__(self, synth: Synthesizer, redis_url: str, rounds: int) -> None:
        self.synth, self.redis_url, self.rounds = synth, redis_url, rounds
        self.voice = voice_of(synth)
        self.serial = 0

    def unique(self, text: str) -> str:
        self.serial += 1
        return f"{text} This is take {self.serial} of {int(time.time())}."

    def model_s(self, chunk: str) -> float:
        started = time.perf_counter()
        infer(self.synth, chunk, self.voice)  # the worker's call
        return time.perf_counter() - started

    async def one(self, text: str, until_eos: bool = False) -> tuple[float, float, dict[str, float]]:
        """(first audio s, model s of its first chunk, trace) for one new text, paired."""
        body = self.unique(text)
        model = self.model_s(first_chunk(body))
        async with stack(self.synth, self.redis_url, self.voice) as st, ClientSession(timeout=ClientTimeout(300)) as http:
            heard = await listen(st, http, body, self.voice, until_eos=until_eos)
            queued = (await enqueued_at(st.redis))[heard.cast_id]
            return heard.first_audio_s, model, stages(st, heard, body, queued)

    async def first_audio(self, name: str, text: str, target: float) -> tuple[Row, dict[str, float]]:
        ratios, traces = [], []
        for _ in range(self.rounds):
            first, model, trace = await self.one(text)
            ratios.append(first / model)
            traces.append(trace)
            print(f"  {name}: first audio {first:.3f} s, model {model:.3f} s -> {first / model:.2f}", flush=True)
        ratio = statistics.median(ratios)
        median_trace = {k: statistics.median(t[k] for t in traces) for k in traces[0]}
        return row(f"{name}: first audio / model time of its first chunk", ratio, target, "<="), median_trace

    async def three(self) -> list[Row]:
        bodies = [self.unique(t) for t in THREE]
        clause = statistics.mean(self.model_s(first_chunk(b)) for b in bodies)
        model_all = sum(self.model_s(c) for b in bodies for c in castlog.split_text(b))
        async with stack(self.synth, self.redis_url, self.voice) as st, ClientSession(timeout=ClientTimeout(900)) as http:
            heard = await asyncio.gather(*(listen(st, http, b, self.voice) for b in bodies))
        firsts = [h.first_audio_s for h in heard]
        audio_s = [sum(ms for _, ms in h.audio) / 1000 for h in heard]
        rtf = model_all / sum(audio_s)
        stall = max(h.stall_s() for h in heard)
        bound = max(0.0, (3 * rtf - 1)) * max(audio_s)
        print(f"  three paragraphs: first audio {[round(f, 2) for f in firsts]} s, clause {clause:.3f} s, "
              f"rtf {rtf:.2f}, stall per client {[round(h.stall_s(), 2) for h in heard]} s, bound {bound:.1f} s",
              flush=True)
        return [
            row("three paragraphs: latest first audio / one first clause's model time", max(firsts) / clause, 3.5, "<="),
            row("three paragraphs: spread of first audio / one first clause's model time",
                (max(firsts) - min(firsts)) / clause, 2.0, "<="),
            row("three paragraphs: longest stall / capacity bound (N x RTF - 1) x audio (+0.5 s)",
                stall / (bound + STALL_SLACK_S), 1.1, "<="),
        ]

    async def throughput(self, text: str) -> Row:
        ratios = []
        for _ in range(self.rounds):
            body = self.unique(text)
            started = time.perf_counter()
            for chunk in castlog.split_text(body):
                infer(self.synth, chunk, self.voice)  # the worker's call
            model = time.perf_counter() - started
            async with stack(self.synth, self.redis_url, self.voice) as st, ClientSession(timeout=ClientTimeout(600)) as http:
                heard = await listen(st, http, body, self.voice)
            worker = heard.audio[-1][0] - heard.answered
            ratios.append(model / worker)
            print(f"  throughput: model {model:.2f} s, worker {worker:.2f} s -> {model / worker:.2f}", flush=True)
        return row("throughput: model alone / worker (job to last audio)", statistics.median(ratios), 0.95, ">=")


def row(what: str, ratio: float, target: float, sense: str) -> Row:
    met = ratio <= target if sense == "<=" else ratio >= target
    return {"what": what, "ratio": round(ratio, 3), "target": f"{sense} {target}", "met": met}


async def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="parts 1 and 2 only, one round")
    parser.add_argument("--parts", default="1234", help="which parts to run, e.g. 123")
    parser.add_argument("--out", type=Path, default=RESULTS / "latency.json")
    args = parser.parse_args()
    # a client that stops following mid-stream is normal here: not an error worth a traceback
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    rounds = 1 if args.quick else args.rounds
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp), aof=False)
        try:
            synth = load_synthesizer("onnx", cache_dir=str(Path(tmp) / "cache"), threads=args.threads)
            synth.warm_up()
            bench = Bench(synth, server.url, rounds)
            print(f"voice {bench.voice}; first chunks: {[first_chunk(t) for t in (SHORT, PARAGRAPH, *THREE[1:])]}")
            rows, traces = [], {}
            parts = "12" if args.quick else args.parts
            for part, name, text, target in (("1", "short text", SHORT, 1.15), ("2", "paragraph", PARAGRAPH, 1.2)):
                if part in parts:
                    r, traces[name] = await bench.first_audio(name, text, target)
                    rows.append(r)
                    print(f"  {name}, per stage (median ms): " + ", ".join(f"{k} {v:g}" for k, v in traces[name].items()))
            if "3" in parts:
                rows += await bench.three()
            if "4" in parts:
                rows.append(await bench.throughput(" ".join(castlog.split_text(PARAGRAPH)[:3])))
        finally:
            server.stop()
    print()
    for r in rows:
        print(f"{'ok ' if r['met'] else 'MISS'} {r['ratio']:>7} (target {r['target']})  {r['what']}")
    write_results(args.out, {"rows": rows, "traces": traces, "threads": args.threads})


if __name__ == "__main__":
    asyncio.run(main())
