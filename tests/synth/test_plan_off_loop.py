"""A whole text is split off the worker's event loop: while its plan is held in the worker
thread, the loop goes on (nothing timed: a plan on the loop would stall this test for good)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import synth.admission
from castlog import CastStore
from synth.worker import Worker
from tests.synth.support import StandIn, config, running, submit, terminal


async def test_an_admitted_whole_text_is_planned_in_a_worker_thread(
    store: CastStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = threading.Event(), threading.Event()
    released: list[bool] = []  # whether the test let the plan go (on the loop it could not)
    real = synth.admission.plan

    def held(*args: Any) -> Any:
        entered.set()
        released.append(release.wait(10))
        return real(*args)

    monkeypatch.setattr(synth.admission, "plan", held)
    cast_id = await submit(store, "Mr. " * 100 + "A long text whose plan is held. It ends here.")
    async with running(Worker(config("test-worker"), store.redis, StandIn())):
        assert await asyncio.to_thread(entered.wait, 30), "the cast was never planned"
        release.set()
        entries = await terminal(store, cast_id)
    assert released == [True]
    assert entries[-1].kind == "eos"
