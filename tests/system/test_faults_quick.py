"""The fault campaign's quick mode (``bench/bench_faults.py --quick``): every fault kind once against
real processes and the real model; it exits non-zero on any violation of the contract."""

from __future__ import annotations

import pytest

from tests.support.benchrun import run_bench

pytestmark = [pytest.mark.model, pytest.mark.timeout(420)]


def test_the_quick_fault_campaign_finds_no_violation() -> None:
    run = run_bench("bench_faults.py", "--quick", "--seed", "15", timeout_s=400)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "| violations | 0 |" in run.stdout
    assert "| power-loss | 1 |" in run.stdout and "| partition-worker | 1 |" in run.stdout
