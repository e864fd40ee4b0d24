"""The README's first command, exactly as written, in a fresh clone: what keeps the README true.

The command is read from README.md (never copied here), run by a shell in a clone of this
repository in a temporary folder (a fresh virtualenv; pip may use its cache), and followed to a
playing cast: the ready line, ``streamtts say`` from the clone's own virtualenv, the MP3 decoded,
then Ctrl-C (SIGINT to the process group, as a terminal sends it) and no process left behind.

Then the README's commands in the order a newcomer meets them: the first run has no
``redis-server`` on PATH (the embedded Valkey serves it), and the second run, after the test
command has apt-installed Debian's Redis, finds it on PATH and must still start on the same state
dir and serve the same cast, byte for byte.

The clone is made from this checkout's committed history: changes not committed are not in it.
In CI the checkout is itself a clean clone, so the two are the same.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from streamtts.redisserver import free_port
from tests.streamtts.running import READY_LINE, cli, mp3_seconds
from tests.support.pathshadow import path_without
from tests.support.processes import alive, descendants

pytestmark = [pytest.mark.model, pytest.mark.firstrun, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parent.parent
# pip install of the synth extra (onnxruntime, PyAV, the Japanese G2P…) and the model's first load.
INSTALL_AND_START_S = 1500.0
TEXT = "こんにちは。今日は良い天気です。"  # with jf_alpha: a first start may add the English packs (npm)


def first_command() -> str:
    """The README's first indented command line, above its first rule."""
    head = (REPO / "README.md").read_text(encoding="utf-8").split("\n---", 1)[0]
    return next(line.strip() for line in head.splitlines() if line.startswith("    ") and line.strip())


def uncommitted() -> str:
    status = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True, check=False)
    if not status.stdout.strip():
        return ""
    return ("\nNote: the clone holds only committed changes; this checkout has uncommitted ones "
            f"that the run did not see:\n{status.stdout}")


def fresh_env(port: int, without: Path | None = None) -> dict[str, str]:
    """This environment without the test run's virtualenv, Redis or source path; the port free.
    With ``without`` (a scratch folder), a PATH without ``redis-server``: a machine before apt-get."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "REDIS_URL", "PYTHONPATH", "PYTHONHOME")}
    venv_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    if without is not None:
        env["PATH"] = path_without(env["PATH"], {"redis-server"}, without)
    env["STREAMTTS_PORT"] = str(port)  # the command as written; the port it serves on, free here
    env["SYNTH_THREADS"] = "2"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def wait_for_ready(proc: subprocess.Popen[bytes], out: Path, err: Path, why: str) -> str:
    deadline = time.monotonic() + INSTALL_AND_START_S
    while time.monotonic() < deadline:
        lines = [line for line in out.read_text(errors="replace").splitlines() if line.startswith(READY_LINE)]
        if lines:
            return lines[0]
        if proc.poll() is not None:
            raise AssertionError(
                f"the README's first command exited with {proc.returncode} before it was ready:\n"
                f"{err.read_text(errors='replace')[-4000:]}{why}"
            )
        time.sleep(0.5)
    raise AssertionError(f"not ready within {INSTALL_AND_START_S}s:\n{err.read_text(errors='replace')[-4000:]}{why}")


def start(command: str, clone: Path, env: dict[str, str], logs: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    out, err = logs.with_suffix(".out"), logs.with_suffix(".err")
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(["bash", "-c", command], cwd=clone, env=env, stdin=subprocess.DEVNULL,
                                stdout=o, stderr=e, start_new_session=True)
    return proc, out, err


def stop(proc: subprocess.Popen[bytes], err: Path) -> None:
    """Ctrl-C in the terminal: everything under the shell ends, cleanly."""
    tree = descendants(proc.pid)
    assert tree, "expected the launcher, Redis and the services under the shell"
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(90) == 0, err.read_text(errors="replace")[-3000:]
    time.sleep(0.5)
    assert [pid for pid in tree if alive(pid)] == [], "processes left behind after Ctrl-C"
    assert "Traceback" not in err.read_text(errors="replace")


def test_the_readmes_first_command_works_in_a_fresh_clone(tmp_path: Path) -> None:
    command = first_command()
    assert command.endswith("streamtts up"), command
    why = uncommitted()
    clone = tmp_path / "streamtts"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # 1. a machine without redis-server: the embedded server writes the state dir
    proc, out, err = start(command, clone, fresh_env(port, without=tmp_path / "no-redis"), tmp_path / "up-1")
    try:
        ready = wait_for_ready(proc, out, err, why)
        assert ready.startswith(f"{READY_LINE}{url} (") and "voices, default " in ready
        said = cli(url, "say", TEXT, "-v", "jf_alpha", "-o", "cast.mp3", cwd=tmp_path, timeout_s=300,
                   command=[str(clone / ".venv" / "bin" / "streamtts")])
        assert said.returncode == 0, said.stderr + why
        assert mp3_seconds(tmp_path / "cast.mp3") > 1.0
        link = re.search(r"/c/([A-Za-z0-9_-]+)", said.stdout + said.stderr)
        assert link, said.stdout + said.stderr
        audio = httpx.get(f"{url}/api/casts/{link[1]}/audio.mp3", timeout=60).content
        stop(proc, err)
        assert (clone / ".state" / "redis" / "redis.log").is_file()  # the relative state dir, made absolute
        writer = json.loads((clone / ".state" / "redis" / "server.json").read_text())
        assert writer["kind"] == "embedded", writer
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # 2. redis-server on PATH now (the test command apt-installs it): the same command, the same cast
    proc, out, err = start(command, clone, fresh_env(port), tmp_path / "up-2")
    try:
        wait_for_ready(proc, out, err, why)
        state = httpx.get(f"{url}/api/casts/{link[1]}", timeout=30).json()
        assert state["status"] == "done", state
        assert httpx.get(f"{url}/api/casts/{link[1]}/audio.mp3", timeout=60).content == audio
        assert json.loads((clone / ".state" / "redis" / "server.json").read_text()) == writer
        stop(proc, err)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
