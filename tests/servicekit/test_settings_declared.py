"""Read from the source: a setting is declared once, and only config modules read the environment.

The services' settings live on their fields (``servicekit.settings.setting``); a second copy of a
variable's name (a constant, a ``__post_init__`` list, an ``environ.get`` elsewhere) is what these
tests refuse.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The modules allowed to touch os.environ: each package's config.py and the reader behind them.
READERS = re.compile(r"^(services/[a-z_]+/config\.py|libs/servicekit/settings\.py)$")
# What a setting's name looks like (castlog's constants such as EDGE_SCOPE are names, not settings:
# only their use as an environment key is looked at, below).
SETTING_NAME = re.compile(r"^(?:INTAKE|EDGE|SYNTH|ARCHIVE|STREAMTTS|KOKORO|REDIS|FORWARDED|RETENTION)_[A-Z0-9_]+$"
                          r"|^LOG_LEVEL$")
# servicekit's OpenAPI document names a limit's setting when no process is at hand to say its value.
DOCUMENTS_NAMES = re.compile(r"^libs/servicekit/openapi\w*\.py$")


def sources() -> dict[str, ast.Module]:
    return {str(p.relative_to(REPO)): ast.parse(p.read_text(encoding="utf-8"))
            for folder in ("libs", "services") for p in sorted((REPO / folder).rglob("*.py"))}


def environment_reads(tree: ast.Module) -> list[int]:
    """Lines that touch the process's environment: ``os.environ``, ``os.getenv``, ``from os import environ``."""
    lines = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
             and n.value.id == "os" and n.attr in ("environ", "environb", "getenv", "putenv")]
    lines += [n.lineno for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "os"
              and any(a.name in ("environ", "environb", "getenv") for a in n.names)]
    return lines


def declarations(trees: dict[str, ast.Module]) -> Counter[str]:
    """The names in ``setting("NAME", ...)`` and ``Setting("NAME", ...)`` calls, counted."""
    found: Counter[str] = Counter()
    for tree in trees.values():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("setting", "Setting") and node.args and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                found[node.args[0].value] += 1
    return found


def name_literals(trees: dict[str, ast.Module]) -> Counter[str]:
    """Every string literal that is exactly a setting-shaped name, counted (docstrings and prose hold
    names inside longer strings, which are mentions, not copies)."""
    found: Counter[str] = Counter()
    for module, tree in trees.items():
        if DOCUMENTS_NAMES.match(module):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SETTING_NAME.match(node.value):
                found[node.value] += 1
    return found


def keyed_by_name(trees: dict[str, ast.Module]) -> list[str]:
    """``x["EDGE_PORT"]``, ``x.get("EDGE_PORT")``, ``x.setdefault(...)``: a mapping read or written by a
    setting's literal name (an environment by another route)."""
    found = []
    for module, tree in trees.items():
        for node in ast.walk(tree):
            key = None
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                key = node.slice.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
                  and node.func.attr in ("get", "setdefault", "pop") and isinstance(node.args[0], ast.Constant)):
                key = node.args[0].value
            if isinstance(key, str) and SETTING_NAME.match(key):
                found.append(f"{module}:{node.lineno} {key}")
    return found


def test_only_config_modules_read_the_environment() -> None:
    trees = sources()
    readers = {m: lines for m, tree in trees.items() if (lines := environment_reads(tree))}
    assert "libs/servicekit/settings.py" in readers  # the check sees a real read
    assert {m: lines for m, lines in readers.items() if not READERS.match(m)} == {}


def test_the_check_sees_a_read_outside_config() -> None:
    tree = ast.parse("import os\nport = os.environ.get('EDGE_PORT')\nfrom os import getenv\n")
    assert environment_reads(tree) == [2, 3]
    assert keyed_by_name({"x.py": tree}) == ["x.py:2 EDGE_PORT"]


def test_every_setting_is_declared_exactly_once() -> None:
    trees = sources()
    declared = declarations(trees)
    assert {"REDIS_URL", "EDGE_LISTENER_QUEUE", "SYNTH_POLL_S", "INTAKE_MAX_BODY_BYTES", "ARCHIVE_URL"} <= set(declared)
    assert {name: n for name, n in declared.items() if n > 1} == {}
    # Nowhere else is a declared name written out whole: callers go through the declaration.
    copies = name_literals(trees)
    assert {name: n - 1 for name, n in copies.items() if name in declared and n > 1} == {}


def test_no_mapping_is_read_by_a_settings_literal_name() -> None:
    assert keyed_by_name(sources()) == []
