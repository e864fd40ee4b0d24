"""Following a cast from the terminal: its records in, the MP3 written as it arrives (it plays
while it grows), and a progress bar (sentences made of planned, audio seconds, an ETA).

The MP3 is the cast's playable view (docs/design.md): a ``start`` with ``resume_from = r`` drops
the audio of sentences ``>= r`` that an earlier attempt made, so the file is cut back to where
sentence ``r`` began and goes on from there.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from .client import Api, ClientError, Event


@dataclass
class Mp3File:
    """The playable audio so far, on disk: sentence index -> (offset, length) of its bytes."""

    out: BinaryIO
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)
    audio_ms: dict[int, int] = field(default_factory=dict)

    @property
    def end(self) -> int:
        return max((off + n for off, n in self.spans.values()), default=0)

    def restart_from(self, resume_from: int) -> None:
        dropped = [i for i in self.spans if i >= resume_from]
        if dropped:
            self.out.truncate(min(self.spans[i][0] for i in dropped))
            for i in dropped:
                del self.spans[i], self.audio_ms[i]
        self.out.seek(self.end)

    def add(self, index: int, body: bytes, duration_ms: int) -> None:
        offset = self.end
        self.out.seek(offset)
        self.out.write(body)
        self.out.flush()  # a player reading the file sees each sentence as it lands
        self.spans[index] = (offset, len(body))
        self.audio_ms[index] = duration_ms


@dataclass
class Outcome:
    status: str  # "done" or "error"
    sentences: int
    audio_s: float
    error: str | None = None


def follow(api: Api, cast_id: str, out_path: Path, *, planned: int, seq_num: int, console: Console) -> Outcome:
    """Follow ``cast_id`` from ``seq_num`` to its end, writing ``out_path``."""
    columns = (
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("sentences"),
        TextColumn("{task.fields[audio]:.1f} s of audio"), TextColumn("ETA"), TimeRemainingColumn(),
    )
    with out_path.open("wb") as out, Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("making", total=planned or None, audio=0.0)
        mp3 = Mp3File(out)
        for event in api.events(cast_id, seq_num):
            outcome = _apply(event, mp3, progress, task)
            if outcome is not None:
                return outcome
    raise ClientError(f"the cast's event stream ended before its end; resume with `streamtts follow {cast_id}`")


def _apply(event: Event, mp3: Mp3File, progress: Progress, task: TaskID) -> Outcome | None:
    h = event.headers
    if event.kind == "meta":
        progress.update(task, total=int(h.get("sentences", 0)) or None)
    elif event.kind == "start":
        mp3.restart_from(int(h.get("resume_from", 0)))
    elif event.kind == "audio" and event.body is not None:
        mp3.add(int(h["i"]), base64.b64decode(event.body), int(h.get("d", 0)))
    elif event.kind == "eos":
        progress.update(task, total=int(h.get("sentences", len(mp3.spans))) or len(mp3.spans))
    audio_s = sum(mp3.audio_ms.values()) / 1000
    progress.update(task, completed=len(mp3.spans), audio=audio_s)
    if event.kind == "eos":
        return Outcome("done", len(mp3.spans), audio_s)
    if event.kind == "error":
        return Outcome("error", len(mp3.spans), audio_s, str(h.get("reason", "unknown error")))
    return None
