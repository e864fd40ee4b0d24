"""The planner: the splitter's count, remembered for recent casts, in bounded memory."""

from __future__ import annotations

import pytest

from castlog import content_id, count_chunks
from intake.plan import OFFLOAD_PLAN_CHARS, Planner


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
