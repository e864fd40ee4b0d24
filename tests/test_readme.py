"""The README's promises: its two commands lead, and its settings table names every setting."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
SETTING = re.compile(r"\b(?:REDIS_URL|FORWARDED_ALLOW_IPS|KOKORO_MODEL_DIR|STREAMTTS_STATE_DIR|(?:INTAKE|EDGE|SYNTH)_[A-Z0-9_]+)\b")


def settings_in_code() -> set[str]:
    found: set[str] = set()
    for path in [*REPO.glob("services/*/config.py"), REPO / "services/streamtts/cli.py"]:
        found |= set(SETTING.findall(path.read_text()))
    return found


def test_readme_opens_with_the_run_and_test_commands() -> None:
    commands = [line.strip() for line in README.split("---", 1)[0].splitlines() if line.startswith("    ")]
    assert commands[0].endswith("streamtts up")
    assert commands[1] == "scripts/test"


def test_every_setting_the_services_read_is_in_the_readme_table() -> None:
    table = set(SETTING.findall(README.split("## Settings", 1)[1]))
    assert settings_in_code() - table == set()
    assert table - settings_in_code() == set(), "the README documents settings no service reads"


def test_home_assistant_url_is_the_one_its_integration_needs() -> None:
    """Home Assistant's OpenAI TTS integration posts to the URL it is given, so it needs the
    endpoint itself (docs/openai.md), not the /v1 base URL the SDK takes."""
    guide = (REPO / "docs" / "openai.md").read_text().split("## Home Assistant", 1)[1]
    [url] = set(re.findall(r"`(http://<streamtts-host>:8080[^`]*)`", guide))
    path = url.split(":8080", 1)[1]
    assert path == "/v1/audio/speech"
    sentence = next(s for s in re.split(r"(?<=[.:])\s", README) if "Home Assistant" in s)
    assert f":8080{path}`" in sentence


def test_every_benchmark_the_code_cites_exists() -> None:
    cited = set()
    for path in [*REPO.glob("services/**/*.py"), *REPO.glob("libs/**/*.py")]:
        cited |= set(re.findall(r"\bbench/\w+\.py\b", path.read_text()))
    assert cited
    assert {c for c in cited if not (REPO / c).is_file()} == set()
