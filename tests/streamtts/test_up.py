"""``streamtts up`` as a user runs it: a real process tree, real signals."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamtts.redisserver import free_port
from tests.support.processes import alive, descendants
from tests.support.waiting import wait_healthy

START_S = 60.0


def start_up(tmp_path: Path, *only: str, wyoming_port: int = 0) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamtts", "up", "--port", str(port), "--state-dir", str(tmp_path / "state"),
         "--only", ",".join(only), "--wyoming-port", str(wyoming_port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_healthy(f"http://127.0.0.1:{port}/healthz", proc, "streamtts up", START_S)
    return proc, port


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_up_serves_health_and_a_stop_leaves_no_process_behind(tmp_path: Path, stop: signal.Signals) -> None:
    proc, _ = start_up(tmp_path, "intake", "edge")
    tree = descendants(proc.pid)
    assert tree, "expected an embedded Redis and the services as children"
    proc.send_signal(stop)
    assert proc.wait(60) == 0
    time.sleep(0.2)
    assert [pid for pid in tree if alive(pid)] == []
    assert (tmp_path / "state" / "redis" / "appendonlydir").is_dir()  # AOF on, in the state dir


@pytest.mark.timeout(120)
def test_killing_the_launcher_outright_takes_its_children_along(tmp_path: Path) -> None:
    proc, _ = start_up(tmp_path, "intake", "edge")
    tree = descendants(proc.pid)
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
    from streamtts.launcher import CHILD_GRACE_MARGIN_S, child_grace_s
    from synth.config import SynthConfig

    assert child_grace_s({}) == SynthConfig().grace_s + CHILD_GRACE_MARGIN_S  # synth's default, read from its declaration
    assert child_grace_s({"SYNTH_GRACE_S": "90"}) == 90 + CHILD_GRACE_MARGIN_S


def up_until_healthy(*args: str, cwd: Path | None = None) -> tuple[int, bytes]:
    """``streamtts up --only intake,edge`` with ``args``, stopped by SIGINT once healthy: its
    exit code and its stderr."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "STREAMTTS_STATE_DIR")}
    proc = subprocess.Popen([sys.executable, "-m", "streamtts", "up", "--port", str(port), "--only", "intake,edge", *args],
                            cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/healthz", proc, "streamtts up", START_S)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.communicate()
    return proc.returncode, err


@pytest.mark.timeout(120)
def test_the_default_relative_state_dir_works_and_keeps_redis_and_its_log_in_it(tmp_path: Path) -> None:
    """The README's run, with the default `.state` relative to where it is started."""
    returncode, err = up_until_healthy(cwd=tmp_path)
    assert returncode == 0, err.decode()
    assert (tmp_path / ".state" / "redis" / "redis.log").read_text()  # where the server was told to write it
    assert (tmp_path / ".state" / "redis" / "appendonlydir").is_dir()
    assert f"data in {tmp_path / '.state' / 'redis'}".encode() in err  # said as an absolute path
    assert b"GET /healthz" not in err  # no line per request at INFO


@pytest.mark.timeout(120)
def test_log_level_debug_adds_one_concise_line_per_request(tmp_path: Path) -> None:
    _, err = up_until_healthy("--state-dir", str(tmp_path / "state"), "--log-level", "debug")
    lines = [line for line in err.decode().splitlines() if "streamtts.access" in line]
    assert lines and re.search(r'INFO streamtts\.access: GET /healthz HTTP/1\.1 200 \d+ [\d.]+s$', lines[0]), lines


def test_a_port_in_use_is_found_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "streamtts", "up", "--port", str(port),
                               "--state-dir", str(tmp_path / "state")], capture_output=True, timeout=30, check=False)
    assert done.returncode == 2
    assert done.stderr.decode().strip() == f"streamtts: port {port} is in use; pass --port"
    assert not (tmp_path / "state").exists()  # nothing was started


def test_version() -> None:
    done = subprocess.run([sys.executable, "-m", "streamtts", "--version"], capture_output=True, timeout=30, check=False)
    assert done.returncode == 0 and re.fullmatch(r"streamtts \S+\n", done.stdout.decode())


def test_a_redis_that_fails_at_start_is_reported_with_its_log_which_exists(tmp_path: Path) -> None:
    from streamtts.redisserver import start_server

    with pytest.raises(RuntimeError) as failed:
        start_server(Path(os.path.relpath(tmp_path / "bad", Path.cwd())), appendfsync="sometimes")  # refused
    message = str(failed.value)
    log = tmp_path / "bad" / "redis.log"
    assert f"Its log is {log}" in message and log.is_file() and "It said:" in message
    assert "appendfsync" in log.read_text().lower() or "appendfsync" in message.lower()


@pytest.mark.timeout(120)
async def test_up_runs_intakes_wyoming_server_on_its_port(tmp_path: Path) -> None:
    """`--wyoming-port` reaches intake: the `wyoming` package's client gets an answer there (no
    worker here: the answer is Wyoming's error event, warming_up)."""
    from wyoming.client import AsyncTcpClient
    from wyoming.info import Describe

    wyoming_port = free_port()
    proc, _ = start_up(tmp_path, "intake", "edge", wyoming_port=wyoming_port)
    try:
        for _ in range(300):  # intake starts after the proxy answers
            try:
                async with AsyncTcpClient("127.0.0.1", wyoming_port) as client:
                    await client.write_event(Describe().event())
                    event = await asyncio.wait_for(client.read_event(), 10)
                break
            except ConnectionRefusedError:
                await asyncio.sleep(0.1)
        assert event is not None and event.type == "error" and event.data["code"] == "warming_up"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
