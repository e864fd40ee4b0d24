"""``streamtts up`` as a user runs it: a real process tree, real signals."""

from __future__ import annotations

import os
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
