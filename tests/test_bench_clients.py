"""The benchmarks import the project like any client: each is a script ``bench/bench_<what>.py``
that finds its helpers beside it (``bench/common.py``), never edits ``sys.path``, never imports
``tests``, and no file in ``bench/`` is named like one of the project's packages (run as a
script, its folder comes first on ``sys.path``, where such a file would shadow the package)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
FILES = sorted(BENCH.glob("*.py"))
SCRIPTS = [p for p in FILES if p.name.startswith("bench_")]
PACKAGES = {p.parent.name for folder in ("libs", "services") for p in (REPO / folder).glob("*/__init__.py")}


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def imported(path: Path) -> set[str]:
    """The top-level names of everything ``path`` imports (relative imports left out)."""
    names: set[str] = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def touches_sys_path(path: Path) -> list[str]:
    """The lines of ``path`` that name ``sys.path`` (or ``from sys import path``), as ``file:line``."""
    found: set[str] = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Attribute) and node.attr == "path" and ast.unparse(node.value) == "sys":
            found.add(f"{path.name}:{node.lineno}")
        elif isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "path" for a in node.names):
            found.add(f"{path.name}:{node.lineno}")
    return sorted(found)


def runs_as_script(path: Path) -> bool:
    return any(isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"
               for node in tree(path).body)


def test_the_checks_see_the_packages_the_scripts_and_what_they_look_for(tmp_path: Path) -> None:
    assert {"castlog", "servicekit", "blobstore", "intake", "synth", "edge", "streamtts"} <= PACKAGES
    assert len(SCRIPTS) >= 10 and (BENCH / "common.py") in FILES
    old_style = tmp_path / "edge.py"  # what bench/edge.py used to open with
    old_style.write_text("import sys\nsys.path[:] = sys.path[1:]\nfrom sys import path\n"
                         "from tests.support import asr\nif __name__ == '__main__':\n    pass\n", encoding="utf-8")
    assert touches_sys_path(old_style) == ["edge.py:2", "edge.py:3"]
    assert "tests" in imported(old_style) and runs_as_script(old_style)


def test_no_file_in_bench_is_named_like_a_package() -> None:
    assert {p.stem for p in FILES} & PACKAGES == set()


def test_no_benchmark_edits_sys_path() -> None:
    assert [hit for p in FILES for hit in touches_sys_path(p)] == []


def test_no_benchmark_imports_the_tests() -> None:
    assert [p.name for p in FILES if "tests" in imported(p)] == []


def test_every_benchmark_is_a_bench_script_and_every_helper_is_not() -> None:
    """One way for all: ``python bench/bench_<what>.py``; the helpers beside them never run alone."""
    assert [p.name for p in FILES if runs_as_script(p) != p.name.startswith("bench_")] == []


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_each_benchmark_imports_as_a_script(script: Path) -> None:
    """``--help`` imports everything the script imports and exits before any work."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "libs"), str(REPO / "services")]))
    run = subprocess.run([sys.executable, str(script), "--help"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("usage: "), run.stdout[:500]
