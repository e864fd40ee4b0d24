"""``streamtts up`` tells the truth about readiness, and a restart resumes a half-made cast at
once (the real model, real signals, the state dir kept between the two runs)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from .running import READY_LINE, start_up

pytestmark = [pytest.mark.model, pytest.mark.timeout(600)]

TEXT = "こんにちは。今日は良い天気です。"
LONG = "".join(f"{n}番目の文です。" for n in range(1, 8))  # 7 sentences
# Far below synth's 60 s lease, which a worker with a new consumer name would wait out first;
# generous for a loaded 2-core machine.
RESUME_BOUND_S = 20.0


def cast_state(url: str, cast_id: str) -> dict[str, object]:
    return httpx.get(f"{url}/api/casts/{cast_id}", timeout=10).json()  # type: ignore[no-any-return]


def wait_for(check, timeout_s: float, what: str) -> object:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout_s}s")


def test_a_submit_from_the_first_second_never_makes_an_error_cast(tmp_path: Path) -> None:
    up = start_up(tmp_path)
    try:
        answers: list[int] = []
        ready_seen_at = None
        with httpx.Client(base_url=f"http://127.0.0.1:{up.port}", timeout=5) as http:
            while True:  # submit from the first moment until one is taken
                try:
                    response = http.post("/api/casts", json={"text": TEXT})
                except httpx.TransportError:
                    time.sleep(0.05)  # the proxy is not listening yet
                    continue
                answers.append(response.status_code)
                if response.status_code < 300:
                    break
                body = response.json()
                assert response.status_code == 503 and body["error"] in ("starting", "warming_up"), body
                assert int(response.headers["Retry-After"]) > 0
                if body["error"] == "warming_up":
                    readyz = http.get("/readyz")
                    if readyz.status_code == 200:  # a worker published between the two requests:
                        response = http.post("/api/casts", json={"text": TEXT})  # ready means taken
                        answers.append(response.status_code)
                        assert response.status_code < 300, ("ready, yet a submit was refused", response.json())
                        break
                    assert readyz.status_code == 503, "not ready while the model loads"
                    assert READY_LINE not in up.stdout()
                time.sleep(0.2)
            cast_id = response.json()["id"]
            assert 503 in answers, "expected to see the system starting first"
            ready = http.get("/readyz").json()
            assert ready["voices"] >= 1 and ready["default"] == http.get("/api/voices").json()["default"]
            ready_seen_at = up.wait_ready(60)
            done = wait_for(lambda: cast_state(up.url, cast_id)["status"] in ("done", "error"), 300, "the cast ends")
            assert done and cast_state(up.url, cast_id)["status"] == "done"
        assert ready_seen_at is not None
        assert up.stdout().count(READY_LINE) == 1
        assert f"{READY_LINE}http://127.0.0.1:{up.port} (" in up.stdout()
        log = up.log()
        for said in ("intake ready on", "edge ready on", "worker ", "synth ready after"):
            assert said in log
        assert "WARNING" not in log and "Traceback" not in log, log
    finally:
        assert up.stop() == 0


def test_a_restart_resumes_a_half_made_cast_at_once(tmp_path: Path) -> None:
    first = start_up(tmp_path)
    try:
        first.wait_ready()
        cast_id = httpx.post(f"{first.url}/api/casts", json={"text": LONG}, timeout=10).json()["id"]
        wait_for(lambda: int(cast_state(first.url, cast_id)["finished"]) >= 2, 300, "two sentences made")  # type: ignore[call-overload]
    finally:
        assert first.stop() == 0
    second = start_up(tmp_path, port=first.port)  # the same state dir: the same Redis data, consumer name
    try:
        second.wait_ready()
        before = cast_state(second.url, cast_id)
        assert before["status"] == "generating" and int(before["finished"]) < int(before["planned"])  # type: ignore[call-overload]
        started = time.monotonic()
        wait_for(lambda: int(cast_state(second.url, cast_id)["finished"]) > int(before["finished"]),  # type: ignore[call-overload]
                 RESUME_BOUND_S, "the next sentence after the restart")
        resumed_s = time.monotonic() - started
        print(f"next sentence {resumed_s:.1f}s after ready (lease {60.0:.0f}s)")
        wait_for(lambda: cast_state(second.url, cast_id)["status"] == "done", 300, "the cast ends")
        log = second.log()  # its own pending job, or the one the stopping worker handed back
        assert "resuming 1 job(s)" in log or "handed back by a stopping worker" in log, log[-3000:]
    finally:
        assert second.stop() == 0
