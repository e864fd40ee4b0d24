"""Derived views of a cast log: the playable audio across attempts, and the cast's state."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from .records import Audio, Entry, Eos, Error, Meta, Queued, Start

Status = Literal["queued", "generating", "done", "error"]


def playable(entries: Iterable[Entry]) -> list[Entry]:
    """The audio a listener hears, in sentence order.

    Each ``start`` keeps the audio of earlier attempts with index ``< resume_from`` and drops
    the rest; the audio that follows it is added. With ``resume_from == 0`` this is simply
    "the audio after the latest start".
    """
    kept: dict[int, Entry] = {}
    for entry in entries:
        record = entry.record
        if isinstance(record, Start):
            kept = {i: e for i, e in kept.items() if i < record.resume_from}
        elif isinstance(record, Audio):
            kept[record.i] = entry
    return [kept[i] for i in sorted(kept)]


@dataclass
class CastState:
    """What a log says about its cast, folded record by record (see :meth:`add`)."""

    title: str = ""
    voice: str = ""
    speed: float = 1.0
    chars: int = 0
    planned: int = 0
    status: Status = "queued"
    attempts: int = 0
    resume_from: int = 0
    error: str | None = None
    cancelled: bool = False  # ended by a cancel: what was spoken, and no more
    tail: int = 0  # the next seq_num
    # Waiting before its first audio (the last `queue` note): its place in line and about how long
    # until its audio starts, as of `queue_at` (ms since the epoch, the note's stamp); None otherwise.
    queue_position: int | None = None
    starts_in_ms: int | None = None
    queue_at: int = 0
    _audio: dict[int, int] = field(default_factory=dict)  # sentence index -> duration ms
    _reused: set[int] = field(default_factory=set)  # sentence indexes made from synth's chunk cache

    @property
    def finished(self) -> int:
        return len(self._audio)

    @property
    def reused(self) -> int:
        """Chunks of the playable audio that came from the chunk cache, not the model."""
        return len(self._reused)

    @property
    def audio_ms(self) -> int:
        return sum(self._audio.values())

    def next_sentence(self) -> int:
        """The first sentence index not yet in the playable audio (where a new attempt resumes)."""
        i = 0
        while i in self._audio:
            i += 1
        return i

    def add(self, entry: Entry) -> None:
        record = entry.record
        self.tail = max(self.tail, entry.seq_num + 1)
        if isinstance(record, Meta):
            self.title, self.voice, self.speed = record.title, record.voice, record.speed
            self.chars, self.planned = record.chars, record.sentences
        elif isinstance(record, Start):
            self.attempts = max(self.attempts, record.attempt)
            self.resume_from = record.resume_from
            self._audio = {i: d for i, d in self._audio.items() if i < record.resume_from}
            self._reused = {i for i in self._reused if i < record.resume_from}
            self.status, self.error = "generating", None
            self.queue_position = self.starts_in_ms = None
        elif isinstance(record, Queued):
            self.status, self.error = "queued", None
            self.queue_position, self.queue_at = record.pos, entry.ts
            self.starts_in_ms = record.eta_ms if record.eta_ms >= 0 else None
        elif isinstance(record, Audio):
            self._audio[record.i] = record.d
            if record.c:
                self._reused.add(record.i)
            else:
                self._reused.discard(record.i)
            self.planned = max(self.planned, record.n)
            self.status = "generating"
        elif isinstance(record, Eos):
            self.planned = max(self.planned, record.sentences)  # a live cast's plan is final here
            self.status, self.cancelled = "done", record.cancelled
            self.queue_position = self.starts_in_ms = None
        elif isinstance(record, Error):
            self.status, self.error = "error", record.reason
            self.attempts = max(self.attempts, record.attempts)


def summarize(entries: Iterable[Entry]) -> CastState:
    state = CastState()
    for entry in entries:
        state.add(entry)
    return state
