"""Run a real Prometheus (Debian's /usr/bin/prometheus) against given targets, for tests.

    with running_prometheus({"synth": ["127.0.0.1:9100"], "edge": ["127.0.0.1:8082"]}) as prom:
        prom.wait_for_targets()
        value = prom.wait_for_value(
            "histogram_quantile(0.5, sum(rate("
            "streamtts_synth_time_to_first_audio_seconds_bucket[1m])) by (le))"
        )

Prometheus listens on a free loopback port, keeps its data in a temporary directory and scrapes
every target each `scrape_interval`. It always scrapes itself too, as job `prometheus`.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from streamtts.redisserver import free_port

PROMETHEUS = "/usr/bin/prometheus"
DEFAULT_JOB = "streamtts"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.2


class PrometheusError(RuntimeError):
    """Prometheus did not start, or a query failed."""


class Prometheus:
    def __init__(self, url: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.url = url
        self.process = process
        self.log = log

    def _get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as response:
            body = json.load(response)
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query; the result vector (raises PrometheusError if it is not a vector)."""
        try:
            data = self._get("/api/v1/query", query=expr)
        except urllib.error.HTTPError as exc:  # 400 / 422: Prometheus explains why in the body
            raise PrometheusError(f"{expr}: {exc.read().decode(errors='replace')}") from exc
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        if data["resultType"] != "vector":
            raise PrometheusError(f"{expr}: result type {data['resultType']}")
        return list(data["result"])

    def targets(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/targets")["activeTargets"])

    def wait_for_targets(self, timeout: float = 15.0) -> list[dict[str, Any]]:
        """Wait until every target has been scraped successfully; returns them."""
        deadline = time.monotonic() + timeout
        while True:
            targets = self.targets()
            if targets and all(t["health"] == "up" for t in targets):
                return targets
            if time.monotonic() > deadline:
                raise PrometheusError(f"targets not up after {timeout}s: {targets}")
            time.sleep(POLL_S)

    def wait_for_value(self, expr: str, timeout: float = 15.0) -> float:
        """Poll an instant query until it yields one finite number; returns it."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if len(result) == 1:
                value = float(result[0]["value"][1])
                if math.isfinite(value):
                    return value
            if time.monotonic() > deadline:
                raise PrometheusError(f"{expr}: no single finite value after {timeout}s: {result}")
            time.sleep(POLL_S)


def _config(
    targets: Mapping[str, Sequence[str]], port: int, scrape_interval: str
) -> dict[str, Any]:
    jobs = {"prometheus": [f"127.0.0.1:{port}"], **targets}
    return {
        "global": {
            "scrape_interval": scrape_interval,
            "scrape_timeout": scrape_interval,
            "evaluation_interval": scrape_interval,
        },
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": list(addresses)}]}
            for job, addresses in jobs.items()
        ],
    }


@contextmanager
def running_prometheus(
    targets: Mapping[str, Sequence[str]] | Sequence[str] = (),
    *,
    scrape_interval: str = "1s",
    port: int | None = None,
    binary: str = PROMETHEUS,
) -> Iterator[Prometheus]:
    """Start Prometheus scraping `targets` ("host:port", or {job: ["host:port", ...]}).

    A plain list of targets becomes one job, "streamtts". `port` picks the listening port
    (a free one by default), so a test can list Prometheus's own address among the targets.
    """
    jobs = dict(targets) if isinstance(targets, Mapping) else {DEFAULT_JOB: list(targets)}
    jobs = {job: addresses for job, addresses in jobs.items() if addresses}
    port = port or free_port()
    workdir = Path(tempfile.mkdtemp(prefix="streamtts-prometheus-"))
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump(_config(jobs, port, scrape_interval)))
    log = workdir / "prometheus.log"
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        _wait_ready(url, process, log)
        yield Prometheus(url, process, log)
    finally:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise PrometheusError(f"prometheus exited with {process.returncode}: {log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(POLL_S)
    raise PrometheusError(f"prometheus not ready after {START_TIMEOUT_S}s: {log.read_text()}")
