"""The check that keeps tests inside the repository: opening a file beside the checkout fails."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import outside

REPO = Path(__file__).resolve().parent.parent


def test_entries_beside_the_checkout_are_refused_and_the_checkout_is_not(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "notes.txt").write_text("beside")
    (tmp_path / "venv").mkdir()
    roots = outside.refused_roots(tmp_path / "repo", places=[str(tmp_path / "venv" / "lib")])
    assert sorted(roots) == [str(tmp_path / "notes.txt"), str(tmp_path / "shared")]  # not the venv


def test_a_checkout_in_the_temporary_folder_keeps_pytests_folders_readable(tmp_path: Path) -> None:
    # tmp_path lies in pytest-of-<user>, an allowed place: a checkout beside it must not refuse it
    basetemp = next(p for p in tmp_path.parents if p.name.startswith("pytest-of-"))
    roots = outside.refused_roots(basetemp.parent / "some-checkout")
    assert all(not (str(tmp_path) + os.sep).startswith(r + os.sep) for r in roots)


def test_opening_a_file_beside_the_checkout_fails() -> None:
    # the hook's own roots: an entry made beside the checkout since (a server's socket in /tmp) is not one
    roots = [r for r in outside.ROOTS if os.path.isdir(r) or os.path.isfile(r)]
    if not roots:  # a checkout alone in its folder: the layout tests above still hold the rule
        return
    beside = Path(roots[0]) / "any-file" if Path(roots[0]).is_dir() else Path(roots[0])
    with pytest.raises(PermissionError, match="outside the repository"):
        open(beside)  # the hook refuses before the file system is asked
    outside.READS.remove(str(beside))  # this one was on purpose: the session stays green
    assert (REPO / "texts" / "short.txt").read_text()  # inside: fine
