"""The return to rest (``bench/bench_soak.py --quick``): the whole system under a bounded count of
mixed traffic from three loopback clients (whole casts followed over SSE and MP3, every
``/v1/audio/speech`` format, live WebSocket turns done, cancelled and hung up, ``/v1/speak`` and
Wyoming turns, Durable Streams made, forked and deleted, admin deletes, refused and malformed
requests), then, once the finished casts are archived, every process back to its open files,
threads and asyncio tasks after the warm-up, Redis to its clients, and no Redis key per request.
The soak waits on those counts (no sleep decides anything); it exits non-zero when they do not
come back."""

from __future__ import annotations

import pytest

from tests.support.benchrun import run_bench

pytestmark = [pytest.mark.model, pytest.mark.timeout(900)]


def test_the_system_returns_to_rest_after_mixed_traffic() -> None:
    run = run_bench("bench_soak.py", "--quick", timeout_s=880)
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-3000:]
    assert "return to rest: ok" in run.stdout
    assert " ok: " in run.stdout.split("outcomes: ", 1)[1].split("\n", 1)[0]  # the traffic was served
