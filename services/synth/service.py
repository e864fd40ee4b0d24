"""Start-up of one synth worker: load the model (in a thread), warm it up, publish the voices,
run the worker; and its graceful stop."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from redis.asyncio import Redis
from redis.exceptions import BusyLoadingError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

import castlog
from servicekit.connect import backoff

from .config import SynthConfig
from .metrics import SynthMetrics
from .model import Synthesizer, load_synthesizer
from .worker import Worker

log = logging.getLogger(__name__)

Loader = Callable[[SynthConfig], Synthesizer]
Phase = Literal["loading", "warming", "running", "stopped", "failed"]


def load_model(cfg: SynthConfig) -> Synthesizer:
    return load_synthesizer(cfg.backend, model_dir=cfg.model_dir, cache_dir=cfg.cache_dir, threads=cfg.threads,
                             voices_dir=cfg.voices_dir, spin=cfg.onnx_spin)


# The default when SYNTH_DEFAULT_VOICE is unset and the model has it; else the first voice.
PREFERRED_VOICE = "af_heart"


def choose_default_voice(wanted: str, voices: list[str]) -> str:
    """SYNTH_DEFAULT_VOICE when this model has it, else af_heart when it has that, else the first
    voice. A warning only for a default that was asked for and is missing."""
    if not voices:
        raise RuntimeError("the model has no voices: check KOKORO_MODEL_DIR and the voice packages")
    if wanted in voices:
        return wanted
    fallback = PREFERRED_VOICE if PREFERRED_VOICE in voices else voices[0]
    if wanted:
        log.warning("SYNTH_DEFAULT_VOICE=%s is not among this model's voices; the default is %s", wanted, fallback)
    return fallback


class SynthService:
    """The model and the worker of one process. ``run`` until ``stop``; ``phase`` for /healthz."""

    def __init__(self, cfg: SynthConfig, redis: Redis, load: Loader = load_model,
                 metrics: SynthMetrics | None = None) -> None:
        self.cfg = cfg
        self.metrics = metrics or SynthMetrics()
        self.redis = redis
        self._load = load
        self.phase: Phase = "loading"
        self.synthesizer: Synthesizer | None = None
        self.worker: Worker | None = None
        self._stop_requested = False
        # Loading must not hold up the exit: its own pool, never waited for at shutdown.
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="synth-load")

    async def run(self) -> None:
        try:
            await self._start()
            if self.worker is not None and not self._stop_requested:
                await self.worker.run()
            self.phase = "stopped"
        except asyncio.CancelledError:
            self.phase = "stopped"
            raise
        except BaseException:
            self.phase = "failed"
            raise
        finally:
            self._pool.shutdown(wait=False)

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        synth = await loop.run_in_executor(self._pool, self._load, self.cfg)
        self.metrics.model_load_seconds.set(time.monotonic() - started)
        log.info("model %s loaded in %.2fs with %d voices", synth.name, time.monotonic() - started, len(synth.voices()))
        self.phase, started = "warming", time.monotonic()
        await loop.run_in_executor(self._pool, synth.warm_up)
        self.metrics.warmup_seconds.set(time.monotonic() - started)
        voices = sorted(synth.voices())
        default = choose_default_voice(self.cfg.default_voice, voices)
        await self._publish(voices, default, synth.name)
        self.metrics.voices_published.set(len(voices))
        self.synthesizer = synth
        self.worker = Worker(self.cfg, self.redis, synth, metrics=self.metrics)
        self.phase = "running"
        log.info("worker %s ready: backend %s, default voice %s", self.cfg.consumer, synth.name, default)

    async def _publish(self, voices: list[str], default: str, backend: str) -> None:
        """Publish the voice list, waiting out a Redis that is down or loading (a worker that
        starts during a Redis restart must not exit: the restart is what it waits for)."""
        for delay in backoff():  # servicekit's waits while Redis is away
            try:
                offer = castlog.VoiceList(
                    voices=tuple(voices), default=default, backend=backend, worker=self.cfg.consumer, at=castlog.now_ms()
                )
                await castlog.publish_voices(self.redis, offer, self.cfg.voices_maxlen)
                return
            except (RedisConnectionError, RedisTimeoutError, BusyLoadingError) as exc:
                if self._stop_requested:
                    raise
                log.warning("cannot publish the voices yet (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)

    def stop(self) -> None:
        """Stop admitting; the worker finishes the chunk in hand and ``run`` returns."""
        self._stop_requested = True
        if self.worker is not None:
            self.worker.stop()
