"""A benchmark's quick mode run as CI runs it: ``python bench/<script> ARGS`` with this checkout's
``libs`` and ``services`` first on the path, its output captured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def run_bench(script: str, *args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "libs"), str(REPO / "services")]))
    return subprocess.run([sys.executable, str(REPO / "bench" / script), *args],
                          env=env, capture_output=True, text=True, timeout=timeout_s)
