"""``streamtts up`` as a user runs it: a real process tree, real signals."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamtts.redisserver import free_port
from tests.support.waiting import wait_healthy

START_S = 60.0


def children_of(pid: int) -> set[int]:
    """Every descendant of ``pid`` (from /proc), however deep."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def start_up(tmp_path: Path, *only: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamtts", "up", "--port", str(port), "--state-dir", str(tmp_path / "state"),
         "--only", ",".join(only)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_healthy(f"http://127.0.0.1:{port}/healthz", proc, "streamtts up", START_S)
    return proc, port


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_up_serves_health_and_a_stop_leaves_no_process_behind(tmp_path: Path, stop: signal.Signals) -> None:
    proc, _ = start_up(tmp_path, "intake", "edge")
    tree = children_of(proc.pid)
    assert tree, "expected an embedded Redis and the services as children"
    proc.send_signal(stop)
    assert proc.wait(60) == 0
    time.sleep(0.2)
    assert [pid for pid in tree if alive(pid)] == []
    assert (tmp_path / "state" / "redis" / "appendonlydir").is_dir()  # AOF on, in the state dir


@pytest.mark.timeout(120)
def test_killing_the_launcher_outright_takes_its_children_along(tmp_path: Path) -> None:
    proc, _ = start_up(tmp_path, "intake", "edge")
    tree = children_of(proc.pid)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(alive(pid) for pid in tree):
        time.sleep(0.2)
    assert [pid for pid in tree if alive(pid)] == []



def launch(tmp_path: Path, env: dict[str, str], *only: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "streamtts", "up", "--port", str(free_port()), "--state-dir", str(tmp_path / "state"),
         "--only", ",".join(only)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )


def read_until(proc: subprocess.Popen[bytes], marker: bytes, timeout_s: float) -> bytes:
    """The launcher's stderr up to the first line with ``marker`` (its log, line by line)."""
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + timeout_s
    while marker not in seen and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    return seen


@pytest.mark.timeout(60)
def test_a_stop_while_waiting_for_an_unreachable_redis_is_quick(tmp_path: Path) -> None:
    env = dict(os.environ, REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")  # nobody listens there
    proc = launch(tmp_path, env, "intake")
    try:
        assert b"not reachable" in read_until(proc, b"not reachable", 30)  # it retries for minutes
        proc.send_signal(signal.SIGINT)
        assert proc.wait(5) == 0
    finally:
        proc.kill()
        proc.communicate()


@pytest.mark.timeout(120)
def test_a_crashed_child_stops_everything_and_says_what_to_do(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["INTAKE_MAX_CHARS"] = "0"  # intake refuses its config and exits at once
    proc = launch(tmp_path, env, "intake", "edge")
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == 1
    assert b"intake exited with code 1" in err and b"python -m intake" in err
    started = [int(pid) for pid in re.findall(rb"started \w+ \(pid (\d+)\)", err)]
    assert len(started) == 2 and not any(alive(pid) for pid in started)  # edge was stopped too


def test_a_stop_waits_for_synth_as_long_as_its_grace_and_a_margin() -> None:
    from streamtts.launcher import CHILD_GRACE_MARGIN_S, SYNTH_GRACE_S, child_grace_s
    from synth.config import SynthConfig

    assert SYNTH_GRACE_S == SynthConfig().grace_s  # the launcher's fallback is synth's default
    assert child_grace_s({}) == SynthConfig().grace_s + CHILD_GRACE_MARGIN_S
    assert child_grace_s({"SYNTH_GRACE_S": "90"}) == 90 + CHILD_GRACE_MARGIN_S
