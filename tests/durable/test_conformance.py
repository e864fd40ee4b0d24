"""The official Durable Streams conformance suite (npm ``@durable-streams/server-conformance-tests``,
pinned in tests/durable/conformance/package.json) against intake + edge behind the proxy.

Every test must pass; the only skips allowed are the suite's own default skips (its reserved
subscription APIs, opt-in). ``scripts/test`` runs ``npm ci`` in that folder first.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.durable.conftest import LONG_POLL_S, serving_origin

RUNNER = Path(__file__).parent / "conformance"
# The suite's opt-in group (ConformanceTestOptions.subscriptions): skipped unless asked for.
DEFAULT_SKIPS = "Reserved subscription APIs"
# 338 tests in 0.3.6, 6 of them the default skips.
SUITE_TESTS = 338
RUN_S = 900


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
async def test_the_official_conformance_suite_passes_in_full(redis: Redis, redis_url: str, tmp_path: Path) -> None:
    npx = shutil.which("npx")
    assert npx is not None, "node and npm are needed (scripts/test installs them)"
    assert (RUNNER / "node_modules" / "@durable-streams").is_dir(), f"run `npm ci` in {RUNNER} (scripts/test does)"
    report_path = tmp_path / "report.json"
    async with serving_origin(redis, redis_url) as base:
        env = {**os.environ, "DS_BASE_URL": base, "DS_LONG_POLL_TEST_MS": str(int(LONG_POLL_S * 1000 + 5000))}
        proc = await asyncio.create_subprocess_exec(
            npx, "vitest", "run", "--reporter=json", f"--outputFile={report_path}", cwd=RUNNER, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(proc.communicate(), RUN_S)
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
