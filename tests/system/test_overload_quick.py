"""bench_overload's quick mode (``bench/bench_overload.py --quick``): five casts POSTed to intake
at once and each heard from edge's ``audio.mp3`` by a real client, a stand-in model in the
worker's own process: every client gets its log's bytes, as long as the records say, and stalls
as the log's stamps say it stalls (within half a second), #37; the script exits non-zero when not."""

from __future__ import annotations

import pytest

from tests.support.benchrun import run_bench

pytestmark = pytest.mark.timeout(300)


def test_the_client_hears_what_the_log_says_under_overload() -> None:
    run = run_bench("bench_overload.py", "--quick", timeout_s=280)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    listeners = [line for line in run.stdout.splitlines() if line.strip().startswith("listener ")]
    assert len(listeners) == 5 and not any("BYTES DIFFER" in line for line in listeners), run.stdout
    assert "worst stall, client (s)" in run.stdout
