"""The voices a submission may ask for: the newest well-formed entry of `synth/voices`.

Intake never accepts a voice that no worker has published. Before any worker has published
(the model is still loading on a new deployment) there is no list, and a submit is answered 503
`warming_up`; once one was, the last published list stands even while every worker is down
(accept now, produce later). The default is INTAKE_DEFAULT_VOICE when the list has it, else the
workers' published default.

Read at most once per refresh interval (one XREVRANGE), and again at once when a request names
a voice that the cached list lacks, so a voice a worker has just published is accepted at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from redis.asyncio import Redis

from castlog import VOICES, Malformed, describe_voice, read_voices, voice_available
from servicekit import answers

from .validate import Refusal

log = logging.getLogger(__name__)

# Seconds a client is told to wait while no worker has published its voices (the model loads).
WARMING_UP_RETRY_S = 5
# Entries of `synth/voices` looked at for a well-formed one (a bad newest entry does not hide
# the older good ones).
SCAN_ENTRIES = 10


@dataclass(frozen=True)
class Voices:
    names: tuple[str, ...]
    default: str
    source: str = "worker"  # published in synth/voices
    backend: str | None = None

    def answer(self) -> answers.Voices:
        """The names, and for each its language, gender and display name (``details``, same order)."""
        return answers.Voices(voices=list(self.names), default=self.default, source=self.source, backend=self.backend,
                              details=[describe_voice(name) for name in self.names])


class VoiceBook:
    """A cached view of the published voices; one per process."""

    def __init__(self, redis: Redis, refresh_s: float, default_voice: str) -> None:
        self._redis = redis
        self._refresh_s = refresh_s
        self._default_voice = default_voice
        self._voices: Voices | None = None
        self._read_at: float | None = None
        self._lock = asyncio.Lock()
        self._warned_id: bytes | None = None  # warn once per malformed entry, not per read

    async def current(self) -> Voices | None:
        """The last published list; None while no worker has ever published one."""
        if self._voices is None or self._read_at is None or time.monotonic() - self._read_at > self._refresh_s:
            return await self.refresh()
        return self._voices

    async def required(self, voice: str | None) -> Voices:
        """The voices to check ``voice`` against, re-read once if the cache does not have it; a
        submit cannot go on without a list: 503 warming_up."""
        voices = await self.current()
        if voices is not None and voice and not voice_available(voice, voices.names):
            voices = await self.refresh()
        if voices is None:
            raise Refusal(503, "warming_up", "the model is loading: no worker has published its voices yet; retry in "
                          f"{WARMING_UP_RETRY_S} s", {"Retry-After": str(WARMING_UP_RETRY_S)})
        return voices

    async def refresh(self) -> Voices | None:
        asked_at = time.monotonic()
        async with self._lock:
            # Whoever held the lock may have read the list since we asked: one read serves all.
            if self._read_at is not None and self._read_at >= asked_at:
                return self._voices
            offer = await read_voices(self._redis, SCAN_ENTRIES, on_malformed=self._warn)
            self._voices = None if offer is None else Voices(
                names=offer.voices, default=self._pick_default(offer.voices, offer.default), backend=offer.backend
            )
            self._read_at = time.monotonic()
            return self._voices

    def _warn(self, entry_id: bytes, exc: Malformed) -> None:
        if entry_id != self._warned_id:
            self._warned_id = entry_id
            log.warning("ignoring malformed %s entry %s (%s)", VOICES, entry_id, exc)

    def _pick_default(self, names: tuple[str, ...], published: str) -> str:
        if self._default_voice in names:
            return self._default_voice
        return published if published in names else names[0]
