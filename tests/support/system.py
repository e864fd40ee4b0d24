"""intake, edge and synth as separate processes on one Redis, as compose runs them, for the
system tests: each started and waited for until ready, all stopped with SIGTERM at the end, and
checked to have exited cleanly and left no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from streamtts.redisserver import RedisServer, free_port, start_server
from tests.support.processes import alive, descendants
from tests.support.waiting import wait_healthy

SERVICES = ("intake", "edge", "synth")
# The system that the end-to-end tests share (tests/conftest.py starts it once a session): the union
# of what each of them needs, none of which changes what another asserts. Intake's and edge's rate
# limits are not what they are about (a cast cut at every position is a burst of requests);
# WebRTC's ports are a small fixed range; Wyoming listens on a port of its own.
SHARED_SETTINGS = {"INTAKE_RATE": "1000", "INTAKE_BURST": "1000", "EDGE_READ_RATE": "100000",
                   "EDGE_READ_BURST": "1000000", "EDGE_MAX_STREAMS_PER_CLIENT": "1000",
                   "WEBRTC_UDP_PORTS": "41300-41320"}
# synth loads and warms the model (and publishes its voices) before its /readyz answers 200
READY_S = 120.0
READY_POLL_S = 0.3
# a SIGTERM lets a service finish what is in hand: the chunk being synthesized, open responses
STOP_S = 40.0
LOG_TAIL_CHARS = 3000


@dataclass
class System:
    """The running system: its Redis, each service's port, and the processes now running."""

    redis: RedisServer
    ports: dict[str, int]
    env: dict[str, str]
    logs: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def url(self, service: str, path: str = "") -> str:
        return f"http://127.0.0.1:{self.ports[service]}{path}"

    def log(self, service: str) -> str:
        """The tail of what ``service`` wrote to stderr (every run of it, restarts included)."""
        path = self.logs / f"{service}.log"
        return path.read_text(errors="replace")[-LOG_TAIL_CHARS:] if path.exists() else ""

    def start(self, service: str) -> None:
        """Start ``service`` (again, after a kill) and block until its /readyz answers 200."""
        with (self.logs / f"{service}.log").open("ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", service], env=self.env, stdin=subprocess.DEVNULL,
                                    stderr=log)
        self.procs[service] = proc
        try:
            wait_healthy(self.url(service, "/readyz"), proc, service, READY_S, interval_s=READY_POLL_S)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{service}'s log:\n{self.log(service)}") from None

    def kill(self, service: str) -> None:
        """SIGKILL ``service``, as a crash would: it hands nothing back."""
        proc = self.procs.pop(service)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> list[str]:
        """SIGTERM every service, wait for each; what went wrong (none when all stopped cleanly)."""
        tree = {pid for proc in self.procs.values() for pid in descendants(proc.pid)}
        for proc in self.procs.values():
            proc.terminate()
        problems = []
        for service, proc in self.procs.items():
            try:
                code = proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                code = None
                proc.kill()
                proc.wait()
            if code != 0:
                problems.append(f"{service} exited with {code} on SIGTERM, not 0:\n{self.log(service)}")
        deadline = time.monotonic() + STOP_S
        while time.monotonic() < deadline and any(alive(pid) for pid in tree):
            time.sleep(0.1)
        left = sorted(pid for pid in tree if alive(pid))
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        if left:
            problems.append(f"processes left behind by the services: {left}")
        self.procs.clear()
        return problems


@contextmanager
def running_system(workdir: Path, *, aof: bool = False, **env: str) -> Iterator[System]:
    """Redis (its data in ``workdir``) and the three services on free loopback ports, the real
    model on onnx with two threads; ``env`` adds to or overrides the services' environment.
    On exit every service must stop cleanly on SIGTERM and leave no process behind."""
    redis = start_server(workdir / "redis", aof=aof)
    (workdir / "cache").mkdir(exist_ok=True)
    ports = {service: free_port() for service in SERVICES}
    environ = dict(os.environ, REDIS_URL=redis.url, SYNTH_BACKEND="onnx", SYNTH_THREADS="2",
                   INTAKE_PORT=str(ports["intake"]), EDGE_PORT=str(ports["edge"]),
                   SYNTH_METRICS_PORT=str(ports["synth"]), SYNTH_CACHE_DIR=str(workdir / "cache"))
    system = System(redis, ports, {**environ, **env}, workdir)
    try:
        for service in SERVICES:
            system.start(service)
        yield system
    finally:
        problems = system.stop()
        redis.stop()
    assert not problems, "\n".join(problems)
