"""The official Durable Streams conformance suite (npm ``@durable-streams/server-conformance-tests``,
pinned in tests/durable/conformance/package.json) against a real ``streamtts up`` (its embedded
Redis, intake, edge and its front proxy as processes; no model: the namespace needs none).

Every test must pass; the only skips allowed are the suite's own default skips (its reserved
subscription APIs, opt-in). ``scripts/test`` runs ``npm ci`` in that folder first.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from streamtts.redisserver import free_port
from tests.durable.conftest import LONG_POLL_S

RUNNER = Path(__file__).parent / "conformance"
# The suite's opt-in group (ConformanceTestOptions.subscriptions): skipped unless asked for.
DEFAULT_SKIPS = "Reserved subscription APIs"
# 338 tests in 0.3.6, 6 of them the default skips.
SUITE_TESTS = 338
RUN_S = 900
START_S = 60.0
# One client (the suite) making hundreds of requests a second: no read limits in its way.
UP_ENV = {"EDGE_DS_LONG_POLL_S": str(LONG_POLL_S), "EDGE_READ_RATE": "100000", "EDGE_READ_BURST": "1000000",
          "EDGE_MAX_STREAMS_PER_CLIENT": "100000", "INTAKE_DS_STREAMS_PER_CLIENT": "1000000",
          "INTAKE_DS_BYTES_PER_CLIENT": str(10**12)}


def _status(method: str, url: str) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return 0


@contextmanager
def streamtts_up(tmp_path: Path) -> Iterator[str]:
    """``streamtts up --only intake,edge`` until edge and intake both answer under /v1/stream."""
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "STREAMTTS_API_KEYS")}, **UP_ENV}
    with (tmp_path / "up.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamtts", "up", "--port", str(port), "--state-dir", str(tmp_path / "state"),
             "--only", "intake,edge"], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        # edge answers the preflight, intake a DELETE of a stream that is not there
        while (_status("OPTIONS", f"{base}/v1/stream/probe"), _status("DELETE", f"{base}/v1/stream/probe")) != (204, 404):
            assert proc.poll() is None, (tmp_path / "up.log").read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "streamtts up did not start"
            time.sleep(0.2)
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, (tmp_path / "up.log").read_text(errors="replace")[-3000:]


def _failures(report: dict) -> list[str]:
    out = []
    for suite in report["testResults"]:
        for test in suite["assertionResults"]:
            if test["status"] == "failed":
                first = (test.get("failureMessages") or [""])[0].splitlines()[:1]
                out.append(f"{' > '.join(test['ancestorTitles'])} :: {test['title']}: {first}")
    return out


@pytest.mark.timeout(RUN_S + 60)
@pytest.mark.rule("ds-offsets", "ds-create", "ds-append", "ds-producer", "ds-close", "ds-delete", "ds-head",
                  "ds-catch-up", "ds-long-poll", "ds-sse", "ds-json", "ds-fork", "ds-expiry", "ds-etag",
                  "ds-cursor", "ds-security-headers")
def test_the_official_conformance_suite_passes_in_full(tmp_path: Path) -> None:
    npx = shutil.which("npx")
    assert npx is not None, "node and npm are needed (scripts/test installs them)"
    assert (RUNNER / "node_modules" / "@durable-streams").is_dir(), f"run `npm ci` in {RUNNER} (scripts/test does)"
    report_path = tmp_path / "report.json"
    with streamtts_up(tmp_path) as base:
        env = {**os.environ, "DS_BASE_URL": base, "DS_LONG_POLL_TEST_MS": str(int(LONG_POLL_S * 1000 + 5000))}
        proc = subprocess.run([npx, "vitest", "run", "--reporter=json", f"--outputFile={report_path}"], cwd=RUNNER,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=RUN_S)
    output = proc.stdout
    assert report_path.exists(), output.decode(errors="replace")[-3000:]
    report = json.loads(report_path.read_text())
    summary = {k: report[k] for k in ("numTotalTests", "numPassedTests", "numFailedTests", "numPendingTests")}
    print(f"conformance: {summary}")
    assert _failures(report) == [], summary
    skipped = [(t["ancestorTitles"], t["title"]) for s in report["testResults"] for t in s["assertionResults"]
               if t["status"] != "passed"]
    assert all(DEFAULT_SKIPS in titles for titles, _ in skipped), skipped
    assert report["numTotalTests"] == SUITE_TESTS
    assert report["numPassedTests"] == SUITE_TESTS - len(skipped)
    assert proc.returncode == 0, output.decode(errors="replace")[-3000:]
