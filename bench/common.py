"""What the benchmarks share: the repository's texts, a throwaway Redis, the services started as
processes and waited for, the lines that print a ratio and its target, and the results as JSON.

A benchmark is a script, ``python bench/bench_WHAT.py``, that imports the project like any
client. Run as a script, its folder is ``sys.path[0]``: that is how it finds ``common`` (and the
fault campaign its ``faultrig`` and ``faultcheck``), and why no file here is named like one of the
project's packages (tests/test_bench_clients.py checks both).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import numpy.typing as npt

from castlog import SAMPLE_RATE
from streamtts.redisserver import RedisServer, free_port, start_server

REPO = Path(__file__).resolve().parent.parent
TEXTS = REPO / "texts"
RESULTS = REPO / "bench" / "results"
# synth loads and warms the real model (and publishes its voices) before it answers /readyz
READY_S = 180.0
READY_POLL_S = 0.2
STOP_S = 60.0
# ToneModel(busy=True)'s matrix side: a product takes a few ms, so its time ends within a few ms.
BUSY_MATRIX = 256


def repo_text(name: str) -> str:
    """One of the repository's texts: short, paragraph, article or tricky."""
    return (TEXTS / f"{name}.txt").read_text(encoding="utf-8")


def repo_texts() -> dict[str, str]:
    """Every text of the repository by name, in name order."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(TEXTS.glob("*.txt"))}


@contextmanager
def temp_redis(*, aof: bool = False, **options: Any) -> Iterator[RedisServer]:
    """A Redis server with its data in a temporary folder, stopped and removed on exit."""
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp) / "redis", aof=aof, **options)
        try:
            yield server
        finally:
            server.stop()


async def wait_healthy(url: str, proc: subprocess.Popen[bytes] | None = None, timeout_s: float = READY_S) -> None:
    """Until ``url`` answers 200; fails at once if ``proc`` (the server) exits first."""
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise SystemExit(f"{url}: the server exited with {proc.returncode}")
            try:
                async with http.get(url) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(READY_POLL_S)
    raise SystemExit(f"{url} not healthy within {timeout_s} s")


@asynccontextmanager
async def services(redis_url: str, names: Iterable[str], *, quiet: bool = False,
                   **env: str) -> AsyncIterator[dict[str, int]]:
    """``python -m NAME`` for each service on a free port, each waited for until /readyz
    answers; their ports by name. ``env`` adds to their environment; ``quiet`` drops their logs."""
    ports = {name: free_port() for name in names}
    port_vars = {"intake": "INTAKE_PORT", "edge": "EDGE_PORT", "synth": "SYNTH_METRICS_PORT"}
    environ = dict(os.environ, REDIS_URL=redis_url, **{port_vars[n]: str(p) for n, p in ports.items()}, **env)
    procs = {name: subprocess.Popen([sys.executable, "-m", name], env=environ, stdin=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL if quiet else None) for name in ports}
    try:
        for name, proc in procs.items():
            await wait_healthy(f"http://127.0.0.1:{ports[name]}/readyz", proc)
        yield ports
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            proc.wait(STOP_S)


def arguments(doc: str | None) -> argparse.ArgumentParser:
    """A benchmark's command line: its module docstring, as written, is its --help."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version()}


def print_rows(rows: Mapping[str, object], width: int, number: str = "{:.2f}") -> None:
    """One line per row: its name padded to ``width``, then its value (numbers as ``number``)."""
    for name, value in rows.items():
        shown = number.format(value) if isinstance(value, float) else str(value)
        print(f"{name:<{width}} {shown}")


def print_target(what: str, met: bool) -> None:
    print(f"target: {what}: {'met' if met else 'MISSED'}")


def write_results(path: Path, payload: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


class ToneModel:
    """A stand-in model: a tone of ``ms_per_char`` a character (at least ``min_s``), made after
    sleeping ``rtf`` times its length: a set pace, whatever else the machine runs. ``busy``: the
    same time spent on matrix products instead of asleep, which let the GIL go as the real
    model's runtime does: the cores loaded as the real model loads them."""

    name = "tone"

    def __init__(self, rtf: float, ms_per_char: float, voice: str, min_s: float = 0.0, busy: bool = False) -> None:
        self.rtf, self.ms_per_char, self.voice, self.min_s, self.busy = rtf, ms_per_char, voice, min_s, busy

    def voices(self) -> list[str]:
        return [self.voice]

    def warm_up(self) -> None:
        pass

    def phonemize(self, text: str, voice: str) -> str:
        return text

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> npt.NDArray[np.float32]:
        audio_s = max(self.min_s, len(text) * self.ms_per_char / 1000 / speed)
        self._spend(self.rtf * audio_s)
        t = np.arange(int(audio_s * SAMPLE_RATE), dtype=np.float32) / SAMPLE_RATE
        return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)

    def synthesize_phonemes(self, phonemes: str, voice: str, speed: float = 1.0) -> npt.NDArray[np.float32]:
        return self.synthesize(phonemes, voice, speed)

    def _spend(self, seconds: float) -> None:
        if not self.busy:
            time.sleep(seconds)
            return
        deadline = time.perf_counter() + seconds
        square = np.ones((BUSY_MATRIX, BUSY_MATRIX), dtype=np.float32)
        product = np.empty_like(square)
        while time.perf_counter() < deadline:
            np.matmul(square, square, out=product)  # BLAS, on its own threads, without the GIL
