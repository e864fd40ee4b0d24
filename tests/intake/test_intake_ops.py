"""Operations: /metrics with the documented names, /healthz, and `python -m intake`."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient
from jobstreams import read_jobs
from redis.asyncio import Redis

from intake import Config
from servicekit import ConfigError
from streamtts.redisserver import free_port, start_server

from .conftest import PUBLISHED_VOICES, MakeClient, publish

Client = TestClient[Any, Any]
REPO = Path(__file__).resolve().parents[2]


def documented_intake_metrics() -> set[str]:
    text = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    section = text.split("## intake", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(streamtts_intake_\w+)`", section))


async def test_every_documented_metric_is_served(client: Client) -> None:
    names = documented_intake_metrics()
    assert len(names) == 9
    await client.post("/api/casts", json={"text": "Hello."})
    text = await (await client.get("/metrics")).text()
    for name in names:
        assert re.search(rf"^{name}(_bucket|_count|_sum)?({{.*}})? ", text, re.M), name


async def test_metrics_count_requests_submits_and_latency(client: Client) -> None:
    for _ in range(2):
        await client.post("/api/casts", json={"text": "Hello."})
    await client.post("/api/casts", json={"text": ""})
    await client.get("/nowhere")
    resp = await client.get("/metrics")
    assert resp.headers["Content-Type"].startswith("text/plain")
    text = await resp.text()
    expected = [
        'streamtts_intake_requests_total{route="/api/casts",status="201"} 1.0',
        'streamtts_intake_requests_total{route="/api/casts",status="200"} 1.0',
        'streamtts_intake_requests_total{route="/api/casts",status="422"} 1.0',
        'streamtts_intake_requests_total{route="unmatched",status="404"} 1.0',
        'streamtts_intake_submits_total{reason="",result="new"} 1.0',
        'streamtts_intake_submits_total{reason="",result="existing"} 1.0',
        'streamtts_intake_submits_total{reason="",result="reenqueued"} 0.0',
        'streamtts_intake_submits_total{reason="empty_text",result="refused"} 1.0',
        "streamtts_intake_submit_seconds_count 2.0",
        "streamtts_intake_rate_limited_total 0.0",
    ]
    for line in expected:
        assert line in text, line


async def test_healthz_is_200_while_redis_answers(client: Client) -> None:
    resp = await client.get("/healthz")
    assert resp.status == 200 and await resp.json() == {"status": "ok"}


@pytest.mark.rule("unavailable-503")
async def test_healthz_and_submits_answer_503_json_when_redis_is_gone(
    make_client: MakeClient, tmp_path: Path
) -> None:
    server = start_server(tmp_path / "redis", aof=False)
    try:
        client = await make_client(redis_url=server.url)
        assert (await client.get("/healthz")).status == 200
    finally:
        server.stop()
    health = await client.get("/healthz")
    assert health.status == 503
    assert (await health.json())["error"] == "unavailable"
    submit = await client.post("/api/casts", json={"text": "Hello."})
    assert submit.status == 503 and submit.headers["Retry-After"] == "2"
    assert set(await submit.json()) == {"error", "message"}


def test_config_reads_every_limit_from_the_environment() -> None:
    cfg = Config.from_env(
        {
            "INTAKE_PORT": "9001",
            "REDIS_URL": "redis://r:6379/1",
            "INTAKE_MAX_CHARS": "500",
            "INTAKE_MAX_BODY_BYTES": "4096",
            "INTAKE_MAX_TITLE_CHARS": "80",
            "INTAKE_RATE": "2.5",
            "INTAKE_BURST": "7",
            "FORWARDED_ALLOW_IPS": "10.0.0.1, 10.0.0.2",
            "INTAKE_DEFAULT_VOICE": "am_adam",
        }
    )
    assert (cfg.port, cfg.redis_url, cfg.max_chars, cfg.max_body_bytes) == (9001, "redis://r:6379/1", 500, 4096)
    assert (cfg.max_title_chars, cfg.rate, cfg.burst) == (80, 2.5, 7)
    assert cfg.forwarded_allow_ips == frozenset({"10.0.0.1", "10.0.0.2"})
    assert cfg.default_voice == "am_adam"
    assert Config.from_env({}) == Config()


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"INTAKE_PORT": "eighty"}, "INTAKE_PORT"),
        ({"INTAKE_BURST": "0"}, "INTAKE_BURST"),
        ({"INTAKE_RATE": "-1"}, "INTAKE_RATE"),
    ],
)
def test_config_names_the_setting_it_cannot_use(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        Config.from_env(env)


async def _wait_healthy(port: int) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(200):
            try:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("intake did not come up")


async def test_python_m_intake_finishes_an_inflight_submit_on_sigterm_then_exits(
    redis_url: str, redis: Redis
) -> None:
    port = free_port()
    await publish(redis, PUBLISHED_VOICES, "af_heart")  # a worker's voices: intake takes no other
    env = {**os.environ, "REDIS_URL": redis_url, "INTAKE_PORT": str(port), "INTAKE_SHUTDOWN_TIMEOUT_S": "5"}
    proc = subprocess.Popen([sys.executable, "-m", "intake"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        await _wait_healthy(port)
        # Redis holds every write for a while: the submit is in flight when the stop signal comes.
        await redis.execute_command("CLIENT", "PAUSE", "1000", "WRITE")
        async with aiohttp.ClientSession() as session:
            submit = asyncio.ensure_future(
                session.post(f"http://127.0.0.1:{port}/api/casts", json={"text": "Sent while stopping."})
            )
            await asyncio.sleep(0.4)
            assert not submit.done()
            proc.send_signal(signal.SIGTERM)
            resp = await asyncio.wait_for(submit, 10)
            assert resp.status == 201
        out, _ = await asyncio.get_running_loop().run_in_executor(None, proc.communicate, None, 15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out.decode()
    assert b"intake stopped" in out
    assert len(await read_jobs(redis)) == 1
