"""The README's promises: its two commands lead, and its settings table names every setting."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
SETTINGS_DOC = REPO / "scripts" / "settings_doc.py"


def settings_doc() -> ModuleType:
    """scripts/settings_doc.py, which writes the README's settings tables from the declarations."""
    spec = importlib.util.spec_from_file_location("settings_doc", SETTINGS_DOC)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_opens_with_the_run_and_test_commands() -> None:
    commands = [line.strip() for line in README.split("---", 1)[0].splitlines() if line.startswith("    ")]
    assert commands[0].endswith("streamtts up")
    assert commands[1] == "scripts/test"


def test_the_settings_tables_are_what_the_declarations_generate() -> None:
    doc = settings_doc()
    assert doc.rewritten(README) == README, "the README's settings tables are stale: run scripts/settings_doc.py"


def test_the_check_fails_on_a_table_edited_by_hand() -> None:
    doc = settings_doc()
    edited = README.replace("| `EDGE_LISTENER_QUEUE` | `64` |", "| `EDGE_LISTENER_QUEUE` | `65` |")
    assert edited != README and doc.rewritten(edited) != edited


def test_every_setting_the_services_read_is_in_the_readme_table_with_its_default() -> None:
    doc = settings_doc()
    declared = [s.env for _, settings in doc.sections() for s in settings]
    assert {"REDIS_URL", "EDGE_LISTENER_QUEUE", "INTAKE_MAX_CHARS", "SYNTH_POLL_S", "ARCHIVE_URL",
            "RETENTION_DAYS", "STREAMTTS_URL", "KOKORO_MODEL_DIR"} <= set(declared)
    assert len(declared) == len(set(declared)), "a setting in two tables"
    region = README.split(doc.BEGIN, 1)[1].split(doc.END, 1)[0]
    rows = dict(re.findall(r"^\| `([A-Z][A-Z0-9_]+)`[^|]* \| ([^|]+) \|", region, re.M))
    assert sorted(rows) == sorted(declared)
    assert all(default.strip() for default in rows.values())


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
