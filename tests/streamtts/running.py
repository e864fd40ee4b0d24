"""``streamtts up`` as a user runs it, for the tests: a real process tree whose output goes to
files, the one "StreamTTS ready at …" line waited for, and a stop with a real signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from streamtts.redisserver import free_port

READY_LINE = "StreamTTS ready at "
# Loading and warming the real model on a loaded 2-core machine.
READY_S = 180.0


@dataclass
class Up:
    proc: subprocess.Popen[bytes]
    port: int
    out: Path  # stdout: the ready line
    err: Path  # stderr: every process's log

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.err.read_text(errors="replace") if self.err.exists() else ""

    def stdout(self) -> str:
        return self.out.read_text(errors="replace") if self.out.exists() else ""

    def wait_ready(self, timeout_s: float = READY_S) -> float:
        """Block until the ready line is printed; the monotonic time it was seen."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if READY_LINE in self.stdout():
                return time.monotonic()
            if self.proc.poll() is not None:
                raise AssertionError(f"streamtts up exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            time.sleep(0.1)
        raise AssertionError(f"no ready line within {timeout_s}s:\n{self.log()[-3000:]}")

    def stop(self, sig: signal.Signals = signal.SIGINT, timeout_s: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def start_up(workdir: Path, *args: str, env: dict[str, str] | None = None, port: int | None = None) -> Up:
    """``streamtts up`` with its state in ``workdir/state``, on a free port, with the packaged voices."""
    port = port or free_port()
    environ = {k: v for k, v in (env or os.environ).items() if k != "REDIS_URL"}
    environ.setdefault("SYNTH_THREADS", "2")
    n = len(list(workdir.glob("up-*.out")))
    out, err = workdir / f"up-{n}.out", workdir / f"up-{n}.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamtts", "up", "--port", str(port), "--state-dir", str(workdir / "state"),
             "--no-voice-install", *args],  # the packaged Japanese voices: no download per test
            env=environ, stdin=subprocess.DEVNULL, stdout=o, stderr=e,
        )
    return Up(proc, port, out, err)


def cli(url: str | None, *args: str, cwd: Path, timeout_s: float = 120.0, stdin: bytes = b"",
        env: dict[str, str] | None = None, command: Sequence[str] | None = None) -> subprocess.CompletedProcess[str]:
    """One run of the ``streamtts`` client (with ``--url`` when given), to its end."""
    argv = [*(command or [sys.executable, "-m", "streamtts"]), *args, *(["--url", url] if url else [])]
    done = subprocess.run(argv, cwd=cwd, input=stdin, capture_output=True, timeout=timeout_s, env=env, check=False)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(errors="replace"),
                                       done.stderr.decode(errors="replace"))


def mp3_seconds(path: Path) -> float:
    """Decode the whole MP3 with PyAV; its length in seconds (every frame decoded, none broken)."""
    import av

    samples = 0
    rate = 0
    with av.open(str(path)) as container:
        for frame in container.decode(audio=0):
            samples += frame.samples
            rate = frame.sample_rate
    return samples / rate if rate else 0.0
