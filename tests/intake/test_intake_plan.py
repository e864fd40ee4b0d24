"""The planner: the splitter's count, remembered for recent casts, in bounded memory."""

from __future__ import annotations

import asyncio
import threading

import pytest
from redis.asyncio import Redis

from castlog import content_id
from chunking import count_chunks
from intake.plan import OFFLOAD_PLAN_CHARS, Planner
from tests.support.apps import MakeClient

from .conftest import keys_besides_rate_limits


@pytest.mark.rule("plan-equals-synthesis")
async def test_plan_is_the_splitters_chunk_count(texts: dict[str, str]) -> None:
    planner = Planner()
    for text in texts.values():
        assert await planner.sentences(content_id(text, "af_heart"), text) == count_chunks(text)


async def test_a_long_text_is_planned_off_the_loop_with_the_same_count() -> None:
    text = "Ein Satz, der nicht endet und weiter geht. " * (OFFLOAD_PLAN_CHARS // 40)
    assert len(text) >= OFFLOAD_PLAN_CHARS
    assert await Planner().sentences(content_id(text, "af_heart"), text) == count_chunks(text)


async def test_a_repeat_is_answered_from_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    planner = Planner()
    assert await planner.sentences("A" * 12, "One. Two. Three.") == 3
    monkeypatch.setattr("intake.plan.count_chunks", lambda text: pytest.fail("planned twice"))
    assert await planner.sentences("A" * 12, "One. Two. Three.") == 3


async def test_memory_is_bounded_and_forgets_the_least_recent() -> None:
    planner = Planner(size=3)
    for i in range(3):
        await planner.sentences(f"id{i}", "One.")
    await planner.sentences("id0", "One.")  # id0 is recent again, id1 is now the oldest
    await planner.sentences("id3", "One. Two.")
    assert len(planner) == 3
    assert "id1" not in planner and "id0" in planner and "id3" in planner


class HeldPlanning:
    """The splitter's count, held in its worker thread until released: a text whose planning
    takes as long as a test wants, without timing anything."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        monkeypatch.setattr("intake.plan.count_chunks", self._count)

    def _count(self, text: str) -> int:
        self.entered.set()
        self.release.wait(30)
        return count_chunks(text)

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, 30), "planning never began"


# A run of stops (16 000 froze intake's loop for 16 s when planned on it) and a maximal text.
PATHOLOGICAL = ["." * 16_000, "Mr. " * 25_000]


@pytest.mark.parametrize("text", PATHOLOGICAL, ids=["run of stops", "maximal titles"])
async def test_another_client_is_served_while_a_long_text_is_planned(
    make_client: MakeClient, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    client = await make_client(max_chars=100_000, max_body_bytes=1 << 20)
    held = HeldPlanning(monkeypatch)
    submitting = asyncio.ensure_future(client.post("/api/casts", json={"text": text, "voice": "af_heart"}))
    await held.wait_entered()
    voices = await client.get("/api/voices")  # another client, served while the plan is held
    assert voices.status == 200
    assert not submitting.done()  # the submit is still planning: the loop did not wait on it
    held.release.set()
    resp = await submitting
    assert resp.status == 201, await resp.text()


async def test_planning_past_its_budget_is_refused_and_leaves_no_trace(
    make_client: MakeClient, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = await make_client(plan_budget_s=0.05)
    held = HeldPlanning(monkeypatch)
    try:
        resp = await client.post("/api/casts", json={"text": "." * 16_000, "voice": "af_heart"})
        assert resp.status == 422, await resp.text()
        body = await resp.json()
        assert body["error"] == "text_too_complex" and "INTAKE_PLAN_BUDGET_S" in body["message"]
        assert await keys_besides_rate_limits(redis) == set()
    finally:
        held.release.set()
