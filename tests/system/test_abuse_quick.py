"""The hostile-client campaign's quick mode (``bench/bench_abuse.py --quick``): every finding of
#21 tried as an attack against real intake and edge processes, clients told apart by loopback
source addresses; it exits non-zero when an attack is not refused or contained. The well-behaved
client's times under attack are printed, never judged here."""

from __future__ import annotations

import pytest

from tests.support.benchrun import run_bench

pytestmark = pytest.mark.timeout(300)


@pytest.mark.rule("write-token", "cross-site-refused", "live-metered", "live-fair")
def test_the_quick_abuse_campaign_finds_no_violation() -> None:
    run = run_bench("bench_abuse.py", "--quick", timeout_s=280)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "violations: 0 of 11 checks" in run.stdout
    assert "ratio" in run.stdout  # the well-behaved client was measured side by side
