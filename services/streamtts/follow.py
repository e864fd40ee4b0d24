"""Following a cast from the terminal: its records in, the MP3 written as it arrives (it plays
while it grows), and a progress bar (sentences made of planned, audio seconds, an ETA).

The MP3 is the cast's playable view (docs/design.md): a ``start`` with ``resume_from = r`` drops
the audio of sentences ``>= r`` that an earlier attempt made, so the file is cut back to where
sentence ``r`` began and goes on from there. Written to a pipe (``-o -``), which cannot be cut
back, a sentence already written is not written again: the listener hears each sentence once.
With ``--json`` each record is also printed as one JSON object (its audio as a byte count).
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from castlog import Audio, CastState, Entry, Start, is_terminal

from .client import Api, ClientError


class AudioSink(Protocol):
    def restart_from(self, resume_from: int) -> None: ...

    def add(self, index: int, body: bytes) -> None: ...


@dataclass
class Mp3File:
    """The playable audio so far, on disk: sentence index -> (offset, length) of its bytes."""

    out: BinaryIO
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def end(self) -> int:
        return max((off + n for off, n in self.spans.values()), default=0)

    def restart_from(self, resume_from: int) -> None:
        dropped = [i for i in self.spans if i >= resume_from]
        if dropped:
            self.out.truncate(min(self.spans[i][0] for i in dropped))
            for i in dropped:
                del self.spans[i]
        self.out.seek(self.end)

    def add(self, index: int, body: bytes) -> None:
        offset = self.end
        self.out.seek(offset)
        self.out.write(body)
        self.out.flush()  # a player reading the file sees each sentence as it lands
        self.spans[index] = (offset, len(body))


@dataclass
class Mp3Stream:
    """The playable audio to a pipe (stdout): in order, each sentence once."""

    out: BinaryIO
    written: set[int] = field(default_factory=set)

    def restart_from(self, resume_from: int) -> None:
        pass  # bytes in a pipe cannot be taken back; `add` skips sentences already written

    def add(self, index: int, body: bytes) -> None:
        if index in self.written:
            return
        self.out.write(body)
        self.out.flush()  # a player on the other end of the pipe starts at once
        self.written.add(index)


def print_json(event: dict[str, Any]) -> None:
    """One event as one line of JSON on stdout (``--json``)."""
    sys.stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def record_event(public: dict[str, Any]) -> dict[str, Any]:
    """A record's public form for ``--json``: the audio's size instead of its base64 body."""
    event = {"event": "record", **{k: v for k, v in public.items() if k != "body"}}
    if public.get("body"):
        event["body_bytes"] = len(base64.b64decode(public["body"]))
    return event


def follow(api: Api, cast_id: str, sink: AudioSink, *, planned: int, seq_num: int, console: Console,
           on_record: Callable[[dict[str, Any]], None] | None = None, show_progress: bool = True) -> CastState:
    """Follow ``cast_id`` from ``seq_num`` to its end, writing its audio to ``sink``; each
    record's public form goes to ``on_record`` too (``--json``). The cast's state at its end."""
    columns = (
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("sentences"),
        TextColumn("{task.fields[audio]:.1f} s of audio"), TextColumn("ETA"), TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False, disable=not show_progress) as progress:
        task = progress.add_task("making", total=planned or None, audio=0.0)
        state = CastState(planned=planned)
        for entry, public in api.records(cast_id, seq_num):
            if on_record is not None:
                on_record(record_event(public))
            if _apply(entry, state, sink, progress, task) is not None:
                return state
    raise ClientError(f"the cast's event stream ended before its end; resume with `streamtts follow {cast_id}`")


def waiting_line(state: CastState) -> str:
    """A cast waiting in line before its first audio: its place and about when it starts (as the
    worker's last `queue` note said; empty once it started)."""
    if state.queue_position is None:
        return ""
    place = "next in line" if state.queue_position == 1 else f"number {state.queue_position} in line"
    if state.starts_in_ms is None:
        return f"queued: {place}"
    return f"queued: {place}, starts in about {max(1, round(state.starts_in_ms / 1000))} s"


def _apply(entry: Entry, state: CastState, mp3: AudioSink, progress: Progress, task: TaskID) -> CastState | None:
    """Fold one record into the cast's state (castlog's fold, as every reader's) and the file;
    the state once the record ends the cast."""
    state.add(entry)
    record = entry.record
    if isinstance(record, Start):
        mp3.restart_from(record.resume_from)
    elif isinstance(record, Audio):
        mp3.add(record.i, record.body)
    progress.update(task, total=state.planned or None, completed=state.finished, audio=state.audio_ms / 1000,
                    description=waiting_line(state) or "making")
    return state if is_terminal(record) else None
