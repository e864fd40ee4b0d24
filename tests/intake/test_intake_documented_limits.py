"""What the README says about speeds matches what intake answers over HTTP."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient

REPO = Path(__file__).resolve().parents[2]


def speed_range(message: str) -> tuple[float, float]:
    """The range named by an `invalid_speed` refusal ("between 0.5 and 2.0" or "from 0.25 to 4.0")."""
    match = re.search(r"(?:between|from) ([\d.]+) (?:and|to) ([\d.]+)", message)
    assert match, message
    return float(match.group(1)), float(match.group(2))


def dashed(low: float, high: float) -> str:
    return f"{low:g}–{high:.1f}" if high == int(high) else f"{low:g}–{high:g}"


async def test_the_readme_states_the_live_and_whole_speed_ranges(client: TestClient[Any, Any]) -> None:
    live = await client.post("/api/casts", json={"live": True, "speed": 9.0})
    assert live.status == 422 and (await live.json())["error"] == "invalid_speed"
    live_range = speed_range((await live.json())["message"])
    whole = await client.post("/api/casts", json={"text": "Hello.", "speed": 9.0})
    assert whole.status == 422
    whole_range = speed_range(str(await whole.json()))
    readme = (REPO / "README.md").read_text()
    assert live_range != whole_range
    assert f"speed` is {dashed(*live_range)}" in readme
    assert f"whole text's {dashed(*whole_range)}" in readme
