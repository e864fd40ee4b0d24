"""The fault campaign's quick mode (``bench/bench_faults.py --quick``): every fault kind once against
real processes and the real model; it exits non-zero on any violation of the contract."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent

pytestmark = [pytest.mark.model, pytest.mark.timeout(420)]


def test_the_quick_fault_campaign_finds_no_violation() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "libs"), str(REPO / "services")]))
    run = subprocess.run([sys.executable, str(REPO / "bench" / "bench_faults.py"), "--quick", "--seed", "15"],
                         env=env, capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "| violations | 0 |" in run.stdout
    assert "| power-loss | 1 |" in run.stdout and "| partition-worker | 1 |" in run.stdout
