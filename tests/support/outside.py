"""A check that tests read only what the repository holds: a file beside the checkout (the old
``../shared/texts``) is missing in a fresh clone. An audit hook on every ``open`` of the test
process refuses a path inside the folders and files that stood beside the checkout when the
session began. Those that hold the interpreter, its packages, the temporary folder or the user's
caches are left alone, wherever the checkout lies (``/tmp/x/repo``, ``/tmp/repo``, ``~/repo``)."""

from __future__ import annotations

import getpass
import os
import sys
import tempfile
from pathlib import Path

READS: list[str] = []  # every refused path, for the session's verdict
ROOTS: list[str] = []  # the refused roots, as the hook saw them when it was installed
_installed: list[Path] = []


def _inside(path: str, folder: str) -> bool:
    return (path + os.sep).startswith(folder.rstrip(os.sep) + os.sep)


def _places() -> list[str]:
    """What tests may read outside the repository: the interpreter, pytest's temporary folders,
    the model and voice caches."""
    temp = tempfile.gettempdir()
    places = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.join(temp, f"pytest-of-{getpass.getuser()}"),
              str(Path.home() / ".cache"), os.environ.get("XDG_CACHE_HOME", ""),
              os.environ.get("STREAMTTS_TEST_MODEL_DIR", "")]
    return [os.path.realpath(p) for p in places if p]


def refused_roots(repo: Path, places: list[str] | None = None) -> list[str]:
    """The entries beside ``repo`` that tests must not read, each a path prefix (``places``:
    the allowed places, by default the machine's)."""
    try:
        beside = [str(e) for e in repo.parent.iterdir() if e.name != repo.name]
    except OSError:
        return []
    places = _places() if places is None else places
    # an entry that holds an allowed place, or lies inside one, is left alone
    return [b for b in beside if not any(_inside(p, b) or _inside(b, p) for p in places)]


def install(repo: Path) -> None:
    if _installed:
        return
    _installed.append(repo)
    roots = tuple(refused_roots(repo))
    ROOTS[:] = roots

    def audit(event: str, args: tuple[object, ...]) -> None:
        if event != "open" or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        path = os.path.abspath(os.fsdecode(args[0]))  # type: ignore[arg-type]
        if any(_inside(path, root) for root in roots):
            READS.append(path)
            raise PermissionError(f"a test opened {path}, outside the repository {repo}: keep what tests read in it")

    sys.addaudithook(audit)
