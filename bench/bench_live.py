"""Live casts: an agent's token stream into the WebSocket, against the model's own time and against
the naive pipeline, side by side in one run.

The whole live path as deployed (intake as its own process, Redis, the worker with its schedule
and MP3 encoder, the WebSocket), with the model at a GPU's speed: this shared 2-core CPU runs
Kokoro at or below real time, slower than an LLM writes, so sentences would queue behind each
other and the ratios would measure that queue, not the live path. The stand-in model makes each
chunk's audio after ``--gpu-rtf`` times its duration, and each call is timed: that time is the
model's time for the sentence in the ratios.

1. per sentence, one session: from the fragment that completed the sentence (the first character
   of the next one, or the close) to the first byte of its audio at the client, divided by the
   model's time for that very sentence. Target: wait <= 1.1 x model + 50 ms for every sentence.
2. first audio of the whole answer: live (first token sent -> first audio byte) against the naive
   pipeline (wait for the whole answer at the same token rate, then submit it whole and wait for
   its first audio record). Target <= 0.3.
3. three agent sessions at once while three long whole-text casts run: the agents' median
   per-sentence ratio against the lone session's. Target <= 1.2.

Tokens are words at ``--tokens-per-s`` (25, an LLM's pace).

    python bench/bench_live.py [--tokens-per-s 25] [--gpu-rtf 0.02]      (under a minute)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import numpy as np
import numpy.typing as npt
from logfollow import follow

import castlog
import chunking
import servicekit
from castlog import SAMPLE_RATE, CastStore, LogReader, Meta
from chunking import Chunker
from synth import appender as appender_module
from synth.config import SynthConfig
from synth.mp3 import EncodedChunk, encode_chunk
from synth.worker import Worker

from common import RESULTS, arguments, repo_text, services, temp_redis, write_results

# The agents' answers: two chunks each, from our own texts (distinct, so each sentence's model
# time is its own).
ARTICLE = chunking.split_text(repo_text("article"))
PARAGRAPH = chunking.split_text(repo_text("paragraph"))
TARGET_RATIO, TARGET_OVERHEAD_S = 1.1, 0.050
# Speech of a chunk: about 16 characters a second, Kokoro's pace in English.
MS_PER_CHAR = 60
# Seconds of model per second of audio for Kokoro-82M on a GPU (tens of times real time).
GPU_RTF = 0.02
VOICE = "af_heart"
Row = dict[str, object]


class PacedModel:
    """A model at a GPU's speed, which this CPU cannot reach: for each chunk, a tone as long as
    speech of that text (``MS_PER_CHAR``) after ``rtf`` times that long; each call is timed
    (text -> seconds), and that time is the model's time for the sentence in every ratio."""

    name = "paced"

    def __init__(self, rtf: float) -> None:
        self.rtf = rtf
        self.seconds: dict[str, float] = {}
        self.samples: dict[str, int] = {}
        self.encode_s: dict[int, float] = {}  # samples -> the MP3 encoder's seconds for them
        self._lock = threading.Lock()

    def voices(self) -> list[str]:
        return [VOICE]

    def timed_encoder(self, encode: Callable[..., EncodedChunk]) -> Callable[..., EncodedChunk]:
        # the worker calls the encoder with one argument (its warm-up) or with a bitrate and trim_lead
        def timed(pcm: npt.NDArray[np.float32], *args: Any, **kwargs: Any) -> EncodedChunk:
            started = time.perf_counter()
            encoded = encode(pcm, *args, **kwargs)
            self.encode_s[len(pcm)] = time.perf_counter() - started
            return encoded

        return timed

    def encoder_s(self, text: str) -> float:
        return self.encode_s.get(self.samples.get(text, -1), 0.0)

    def warm_up(self) -> None:
        pass

    def phonemize(self, text: str, voice: str) -> str:
        return text

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> npt.NDArray[np.float32]:
        started = time.perf_counter()
        audio_s = len(text) * MS_PER_CHAR / 1000
        t = np.arange(int(audio_s * SAMPLE_RATE), dtype=np.float32) / SAMPLE_RATE
        pcm = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
        time.sleep(max(0.0, self.rtf * audio_s - (time.perf_counter() - started)))
        with self._lock:
            self.seconds[text] = time.perf_counter() - started
            self.samples[text] = len(pcm)
        return pcm

    def synthesize_phonemes(self, phonemes: str, voice: str, speed: float = 1.0) -> npt.NDArray[np.float32]:
        return self.synthesize(phonemes, voice, speed)


@dataclass
class Session:
    """One agent's answer: when each chunk became complete at the client, and when its audio came."""

    text: str
    started: float = 0.0
    complete_at: list[float] = field(default_factory=list)
    chunks: list[str] = field(default_factory=list)
    first_byte: dict[int, float] = field(default_factory=dict)

    def waits(self, model: PacedModel) -> list[tuple[float, float]]:
        """(wait, model seconds) per sentence."""
        return [(self.first_byte[i] - self.complete_at[i], model.seconds[c]) for i, c in enumerate(self.chunks)]

    def encoder_s(self, model: PacedModel) -> list[float]:
        return [model.encoder_s(c) for c in self.chunks]


def answer(sentences: list[str], start: int) -> str:
    return " ".join(sentences[start : start + 2])


async def agent(http: aiohttp.ClientSession, url: str, voice: str, text: str, rate: float) -> Session:
    session = Session(text)
    chunker = Chunker()
    async with http.ws_connect(url) as ws:
        await ws.send_json({"type": "start", "voice": voice})
        assert json.loads((await ws.receive()).data)["type"] == "cast"
        receiving = asyncio.ensure_future(_receive(ws, session))
        session.started = time.perf_counter()
        words = text.split(" ")
        for k, word in enumerate(words):
            await asyncio.sleep(max(0.0, session.started + k / rate - time.perf_counter()))
            token = word if k == len(words) - 1 else word + " "
            await ws.send_json({"type": "text", "text": token})
            _completed(session, chunker.feed(token))
        await ws.send_json({"type": "close"})
        _completed(session, chunker.flush())
        await receiving
    return session


def _completed(session: Session, chunks: list[str]) -> None:
    now = time.perf_counter()
    session.chunks += chunks
    session.complete_at += [now] * len(chunks)


async def _receive(ws: aiohttp.ClientWebSocketResponse, session: Session) -> None:
    index = -1
    async for msg in ws:
        if msg.type == aiohttp.WSMsgType.BINARY:
            session.first_byte.setdefault(index, time.perf_counter())
        elif msg.type == aiohttp.WSMsgType.TEXT:
            event = json.loads(msg.data)
            if event["type"] == "sentence":
                index = event["index"]
            elif event["type"] in ("done", "error"):
                return


async def naive_first_audio(store: CastStore, text: str, voice: str, rate: float) -> float:
    """Wait for the whole answer at the token rate, submit it whole, wait for its first audio."""
    started = time.perf_counter()
    await asyncio.sleep(len(text.split(" ")) / rate)
    cast_id = castlog.content_id(text, voice)
    meta = Meta(title="naive", voice=voice, chars=len(text), sentences=chunking.count_chunks(text), created_at=0)
    await store.submit(cast_id, text, voice, meta)
    async for entry in follow(LogReader(store.redis), cast_id):
        if entry.kind == "audio":
            return time.perf_counter() - started
    raise RuntimeError("the naive cast ended without audio")


async def wait_for_audio(store: CastStore, cast_id: str, count: int) -> None:
    seen = 0
    async for entry in follow(LogReader(store.redis), cast_id):
        seen += entry.kind == "audio"
        if seen >= count:
            return


def ratios(sessions: list[Session], model: PacedModel) -> list[float]:
    return [wait / model_s for s in sessions for wait, model_s in s.waits(model)]


def per_sentence_row(what: str, session: Session, model: PacedModel) -> Row:
    waits = session.waits(model)
    worst = max(wait / (TARGET_RATIO * m + TARGET_OVERHEAD_S) for wait, m in waits)
    overhead_ms = [1000 * (wait - m) for wait, m in waits]
    encoder = session.encoder_s(model)
    beyond_ms = [o - 1000 * e for o, e in zip(overhead_ms, encoder)]
    return {
        "what": what, "sentences": len(waits), "ratio_median": statistics.median(w / m for w, m in waits),
        "ratio_max": max(w / m for w, m in waits), "overhead_ms_median": statistics.median(overhead_ms),
        "overhead_ms_max": max(overhead_ms), "mp3_encode_ms_median": 1000 * statistics.median(encoder),
        "overhead_beyond_encode_ms_median": statistics.median(beyond_ms),
        "ratio_to_model_and_encode_median": statistics.median(
            w / (m + e) for (w, m), e in zip(waits, encoder)
        ),
        "target": "wait <= 1.1 x model + 50 ms", "met": worst <= 1.0,
    }


async def run(args: argparse.Namespace) -> dict[str, Row]:
    model = PacedModel(args.gpu_rtf)
    with temp_redis() as redis_server:
        async with services(redis_server.url, ["intake"], INTAKE_RATE="1000", INTAKE_BURST="1000",
                            INTAKE_LIVE_CHARS_PER_MIN="1000000") as ports:  # one client plays three agents
            port = ports["intake"]
            redis = servicekit.client_for(redis_server.url)
            # as a worker does at start-up: intake takes only voices a worker has published
            offer = castlog.VoiceList(voices=tuple(model.voices()), default=VOICE)
            await castlog.publish_voices(redis, offer, maxlen=100)
            appender_module.encode_chunk = model.timed_encoder(encode_chunk)  # type: ignore[assignment]
            worker = Worker(SynthConfig(consumer="bench", poll_s=0.1), redis, model)
            task = asyncio.ensure_future(worker.run())
            try:
                return await measure(args, model, VOICE, CastStore(redis), f"ws://127.0.0.1:{port}/v1/audio/speech/live")
            finally:
                worker.stop()
                await asyncio.wait_for(task, 60)
                await redis.aclose()


async def measure(args: argparse.Namespace, model: PacedModel, voice: str, store: CastStore, url: str) -> dict[str, Row]:
    rate = args.tokens_per_s
    results: dict[str, Row] = {}
    async with aiohttp.ClientSession() as http:
        lone = await agent(http, url, voice, answer(ARTICLE, 1), rate)
        results["per_sentence"] = {
            **per_sentence_row("one session", lone, model), "tokens_per_s": rate, "gpu_rtf": args.gpu_rtf
        }
        # An agent's answer of several sentences (the naive pipeline waits for all of them).
        long_answer = " ".join(ARTICLE[1:7])
        naive = await naive_first_audio(store, long_answer + " ", voice, rate)
        spoken = await agent(http, url, voice, long_answer, rate)
        live_first = min(spoken.first_byte.values()) - spoken.started
        results["first_audio"] = {"what": "first audio of the answer: live / naive (whole text, then submit)",
                                  "live_s": live_first, "naive_s": naive, "ratio": live_first / naive,
                                  "target": "<= 0.3", "met": live_first / naive <= 0.3}
        # The same three sessions without batch casts: what the agents cost each other.
        agents = await asyncio.gather(*(agent(http, url, voice, answer(PARAGRAPH, k), rate) for k in (2, 4, 6)))
        without_batch = statistics.median(ratios(list(agents), model))
        batch = [" ".join(ARTICLE[a:b]) for a, b in ((3, 9), (9, 13), (13, 17))]
        for text in batch:
            cid = castlog.content_id(text, voice)
            await store.submit(cid, text, voice, Meta(title="batch", voice=voice, chars=len(text),
                                                      sentences=chunking.count_chunks(text), created_at=0))
        for text in batch:  # running: each past its ramp of short first chunks
            await wait_for_audio(store, castlog.content_id(text, voice), 3)
        agents = await asyncio.gather(*(agent(http, url, voice, answer(PARAGRAPH, k), rate) for k in (2, 4, 6)))
        together = statistics.median(ratios(list(agents), model))
        alone = statistics.median(ratios([lone], model))
        results["three_agents_with_batch"] = {
            "what": "3 agents + 3 batch casts: median per-sentence ratio / a lone session's",
            "together": together, "alone": alone, "ratio": together / alone, "target": "<= 1.2",
            "met": together / alone <= 1.2, "three_agents_without_batch": without_batch,
            "with_batch_over_without": together / without_batch,
        }
    return results


def report(results: dict[str, Row]) -> None:
    for name, row in results.items():
        shown = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items() if k != "what")
        print(f"{name}: {row['what']}\n    {shown}")


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens-per-s", type=float, default=25.0)
    parser.add_argument("--gpu-rtf", type=float, default=GPU_RTF)
    args = parser.parse_args()
    results = asyncio.run(run(args))
    report(results)
    write_results(RESULTS / "live.json", results)


if __name__ == "__main__":
    main()
