"""The voices a submission may ask for: the newest entry of `synth/voices`, else the config's list.

Read at most once per refresh interval (one XREVRANGE), and again at once when a request names
a voice that the cached list lacks, so a voice a worker has just published is accepted at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import msgspec
from redis.asyncio import Redis

from castlog import VOICES, describe_voice

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Voices:
    names: tuple[str, ...]
    default: str
    source: str  # "worker" (published in synth/voices) or "config" (INTAKE_VOICES)
    backend: str | None = None

    def to_json(self) -> dict[str, object]:
        """The names, and for each its language, gender and display name (``details``, same order)."""
        return {"voices": list(self.names), "default": self.default, "source": self.source, "backend": self.backend,
                "details": [describe_voice(name).to_json() for name in self.names]}


class VoiceBook:
    """A cached view of the published voices; one per process."""

    def __init__(
        self,
        redis: Redis,
        fallback: Voices,
        refresh_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._redis = redis
        self._fallback = fallback
        self._refresh_s = refresh_s
        self._clock = clock
        self._voices = fallback
        self._read_at: float | None = None
        self._lock = asyncio.Lock()
        self._warned_id: bytes | None = None  # warn once per malformed entry, not per read

    async def current(self) -> Voices:
        if self._read_at is None or self._clock() - self._read_at > self._refresh_s:
            return await self.refresh()
        return self._voices

    async def offering(self, voice: str | None) -> Voices:
        """The voices to check ``voice`` against, re-read once if the cache does not have it."""
        voices = await self.current()
        if voice and voice not in voices.names:
            voices = await self.refresh()
        return voices

    async def refresh(self) -> Voices:
        asked_at = self._clock()
        async with self._lock:
            # Whoever held the lock may have read the list since we asked: one read serves all.
            if self._read_at is not None and self._read_at >= asked_at:
                return self._voices
            rows: list[tuple[bytes, dict[bytes, bytes]]]
            rows = await self._redis.xrevrange(VOICES, count=1)  # type: ignore[assignment]
            self._voices = self._parse(rows[0][0], rows[0][1]) if rows else self._fallback
            self._read_at = self._clock()
            return self._voices

    def _parse(self, entry_id: bytes, fields: dict[bytes, bytes]) -> Voices:
        try:
            names = msgspec.json.decode(fields.get(b"voices", b""), type=tuple[str, ...])
            default = fields.get(b"default", b"").decode()
            backend = fields[b"backend"].decode() if b"backend" in fields else None
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            if entry_id != self._warned_id:
                self._warned_id = entry_id
                log.warning("ignoring malformed %s entry %s (%s); using INTAKE_VOICES", VOICES, entry_id, exc)
            return self._fallback
        if not names:
            return self._fallback
        default = default if default in names else names[0]
        return Voices(names=names, default=default, source="worker", backend=backend)
