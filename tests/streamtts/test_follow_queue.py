"""`streamtts say` / `follow` tell a cast waiting in line its place and when it starts: the
progress line folds the worker's `queue` records (castlog's fold, as every reader's)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.progress import Progress, TextColumn

from castlog import CastState, Entry, Meta, Queued, Start
from streamtts.follow import _apply, waiting_line


class Sink:
    def restart_from(self, resume_from: int) -> None:
        pass

    def add(self, index: int, body: bytes) -> None:
        pass


@pytest.mark.rule("queue-noted")
def test_progress_says_the_place_and_estimate_until_the_cast_starts() -> None:
    console = Console(file=io.StringIO(), force_terminal=False)
    with Progress(TextColumn("{task.description}"), console=console) as progress:
        task = progress.add_task("making", total=None, audio=0.0)
        state = CastState()
        seen = []
        records = [Meta(title="t", voice="af_heart", chars=300, sentences=4, created_at=0),
                   Queued(pos=3, eta_ms=41_600), Queued(pos=1, eta_ms=-1), Queued(pos=1, eta_ms=2_400),
                   Start(attempt=1, resume_from=0, at=0)]
        for seq, record in enumerate(records):
            assert _apply(Entry(seq, record, ts=1000 + seq), state, Sink(), progress, task) is None
            seen.append(progress.tasks[0].description)
    assert seen == ["making", "queued: number 3 in line, starts in about 42 s", "queued: next in line",
                    "queued: next in line, starts in about 2 s", "making"]
    assert waiting_line(state) == ""
