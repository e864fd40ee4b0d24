"""The check that keeps tests inside the repository: opening a file beside the checkout fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import outside

REPO = Path(__file__).resolve().parent.parent


def test_opening_a_file_beside_the_checkout_fails() -> None:
    beside = REPO.parent / "shared" / "texts" / "short.txt"
    with pytest.raises(PermissionError, match="outside the repository"):
        open(beside)  # the hook refuses before the file system is asked
    outside.READS.remove(str(beside))  # this one was on purpose: the session stays green
    assert (REPO / "texts" / "short.txt").read_text()  # inside: fine
