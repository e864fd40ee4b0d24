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
