"""bench_latency's traced worker: a real synth ``Worker`` in a process of its own, stamping each
first chunk's way through it (time.time(), the client's clock: one machine) into a JSON-lines file.

The benchmark starts it once per source tree it compares (``python bench/bench_latency.py
--worker TRACE``, with that tree's ``libs`` and ``services`` on PYTHONPATH), so the hooks below
reach only names that both trees have: the admitter's ``admit``, the store's ``append_stamped``,
the inboxes' read of new jobs (``synth.jobs.read_new`` in older trees), ``mark_in_hand``
(``hold`` in older trees), the appender's ``encode_chunk`` (``synth.lane``'s in older trees), the
synthesizer's ``synthesize_timed`` and its G2P's ``with_words``.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt
from listening import english_model_dir
from modelwrap import Wrapped

import castlog
import servicekit
import synth.jobs as jobs_module
from synth.config import SynthConfig
from synth.model import Synthesizer, load_synthesizer
from synth.model.base import Word
from synth.worker import Worker

try:
    import synth.appender as appender_module
except ImportError:  # a tree from before synth.appender (it was synth.lane)
    import synth.lane as appender_module  # type: ignore[import-not-found,no-redef]

VOICE = "af_heart"


class Stamps:
    """One line per stamp: ``{"key", "stage", "t"}`` (key: a cast id, a chunk's text, or
    ``encode`` with the PCM's length in ``n``), flushed at once so the client reads it after eos."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def mark(self, key: str, stage: str, **more: Any) -> None:
        self.out.write(json.dumps({"key": key, "stage": stage, "t": time.time(), **more}) + "\n")
        self.out.flush()


def read_stamps(path: Path, offset: int = 0) -> tuple[dict[str, dict[str, float]], int]:
    """The stamps written since byte ``offset``: the first of each (key, stage), encodes as
    ``encode-<i>`` in order; and where the next read goes on."""
    out: dict[str, dict[str, float]] = {}
    encodes = 0
    with path.open("rb") as f:
        f.seek(offset)
        text = f.read()
    for line in text.decode().splitlines():
        stamp = json.loads(line)
        key = stamp["key"]
        if key == "encode":
            encodes += stamp["stage"] == "encode"
            key = f"encode-{encodes}"
        out.setdefault(key, {}).setdefault(stamp["stage"], stamp["t"])
    return out, offset + len(text)


class TracedSynth(Wrapped):
    """The real synthesizer, stamping every chunk's model call on the worker's path
    (``synthesize_timed``: G2P and inference in one call, as in production)."""

    def __init__(self, real: Synthesizer, stamps: Stamps) -> None:
        super().__init__(real)
        self.stamps = stamps
        g2p = getattr(real, "_g2p", None)  # KokoroSynthesizer's: its end splits G2P from the model
        if g2p is not None:
            with_words = g2p.with_words

            def traced_with_words(text: str, voice: str) -> Any:
                out = with_words(text, voice)
                stamps.mark(text, "g2p_done")
                return out

            g2p.with_words = traced_with_words

    def synthesize_timed(self, text: str, voice: str, speed: float = 1.0) -> tuple[npt.NDArray[np.float32], list[Word]]:
        self.stamps.mark(text, "model")
        out = super().synthesize_timed(text, voice, speed)
        self.stamps.mark(text, "model_done")
        return out


def trace_worker(worker: Worker, stamps: Stamps) -> None:
    """Stamp the job's read, admission, the encoder and the append of each cast's first audio."""
    admit, append = worker.admitter.admit, worker.store.append_stamped
    in_hand = "mark_in_hand" if hasattr(jobs_module, "mark_in_hand") else "hold"  # an older tree's name
    hold, encode = getattr(jobs_module, in_hand), appender_module.encode_chunk

    def traced_read(read_new: Any) -> Any:
        async def read(*args: Any, **kwargs: Any) -> Any:
            entries = await read_new(*args, **kwargs)
            for entry in entries:  # (entry id, fields, ...) in either tree
                stamps.mark(entry[1].get(b"id", b"").decode(), "read")
            return entries
        return read

    async def traced_hold(redis: Any, entry_id: str, index: int) -> None:
        stamps.mark(f"hold-{entry_id}", "hold")
        await hold(redis, entry_id, index)
        stamps.mark(f"hold-{entry_id}", "held")

    async def traced_admit(job: Any) -> None:
        stamps.mark(job.cast_id, "admit")
        await admit(job)
        stamps.mark(job.cast_id, "admitted")

    def traced_encode(pcm: Any, *args: Any, **kwargs: Any) -> Any:
        stamps.mark("encode", "encode", n=len(pcm))
        out = encode(pcm, *args, **kwargs)
        stamps.mark("encode", "encoded", n=len(pcm))
        return out

    async def traced_append(cast_id: str, tail: int, records: list[Any]) -> Any:
        first = any(isinstance(r, castlog.Audio) and r.i == 0 for r in records)
        if first:
            stamps.mark(cast_id, "append")
        stamped = await append(cast_id, tail, records)
        if first:
            stamps.mark(cast_id, "appended")
        return stamped

    worker.admitter.admit = traced_admit  # type: ignore[method-assign]
    worker.store.append_stamped = traced_append  # type: ignore[method-assign]
    if hasattr(jobs_module, "read_new"):  # a tree from before castlog.groups
        jobs_module.read_new = traced_read(jobs_module.read_new)
    else:
        hand = worker.crew.hand if hasattr(worker.crew, "hand") else worker.crew.held  # older: Holdings
        for inbox in hand.inboxes:
            inbox.group.new = traced_read(inbox.group.new)  # type: ignore[method-assign]
    setattr(jobs_module, in_hand, traced_hold)
    appender_module.encode_chunk = traced_encode  # type: ignore[assignment]


async def run_worker(trace: Path, redis_url: str, threads: int) -> None:
    """Load the model, publish its voice, say ``ready`` on stdout, work until SIGTERM."""
    real = load_synthesizer("onnx", model_dir=str(english_model_dir()), cache_dir=str(trace.parent / "cache"),
                            threads=threads)
    real.warm_up()
    redis = servicekit.client_for(redis_url)
    with trace.open("a", encoding="utf-8") as out:
        stamps = Stamps(out)
        # the service's defaults (SYNTH_POLL_S and the rest), as `python -m synth` runs, but no
        # chunk cache: every round's first chunk is the same text, and the bench times the model
        cfg = SynthConfig(redis_url=redis_url, consumer="bench-latency", chunk_cache_bytes=0)
        worker = Worker(cfg, redis, TracedSynth(real, stamps))
        trace_worker(worker, stamps)
        await castlog.publish_voices(redis, castlog.VoiceList(voices=(VOICE,), default=VOICE), maxlen=100)
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, worker.stop)
        print("ready", flush=True)
        await worker.run()
    await redis.aclose()
