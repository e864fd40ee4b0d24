"""A check that tests read only what the repository holds: a file beside the checkout (the old
``../shared/texts``) is missing in a fresh clone. An audit hook on every ``open`` of the test
process refuses a path in the checkout's parent folder that lies outside the repository (the
interpreter, its packages, the temporary folder and the user's caches are allowed wherever they are)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

READS: list[str] = []  # every refused path, for the session's verdict
_installed: list[Path] = []


def install(repo: Path) -> None:
    if _installed:
        return
    _installed.append(repo)
    parent = str(repo.parent) + os.sep
    # The repository, the interpreter, and the places every machine has wherever the checkout lies:
    # the temporary folder (pytest's tmp_path) and the user's caches (the model and voice packs).
    places = {str(repo), sys.prefix, sys.base_prefix, sys.exec_prefix, tempfile.gettempdir(),
              str(Path.home() / ".cache"), os.environ.get("XDG_CACHE_HOME", ""),
              os.environ.get("STREAMTTS_TEST_MODEL_DIR", "")}
    allowed = tuple(str(Path(p).resolve()) + os.sep for p in places if p)

    def audit(event: str, args: tuple[object, ...]) -> None:
        if event != "open" or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        path = os.path.abspath(os.fsdecode(args[0]))  # type: ignore[arg-type]
        if path.startswith(parent) and not (path + os.sep).startswith(allowed):
            READS.append(path)
            raise PermissionError(f"a test opened {path}, outside the repository {repo}: keep what tests read in it")

    sys.addaudithook(audit)
