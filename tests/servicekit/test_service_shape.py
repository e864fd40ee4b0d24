"""The services' common shape: one JSON error middleware, probes built from checks, the metrics
base class, and the runner's graceful stop (SIGTERM, a task that ends, a task that fails)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import Counter, generate_latest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from castlog import ArchiveUnavailable
from servicekit import (
    Problem,
    Refusal,
    RequestCounter,
    ServiceMetrics,
    json_errors,
    probe,
    redis_answers,
)
from servicekit.answers import Health
from streamtts.redisserver import free_port

REPO = Path(__file__).resolve().parents[2]
CODES = {404: ("not_found", "no such route"), 405: ("method_not_allowed", "use GET")}


def _app(counted: list[tuple[str, int]], **more: object) -> web.Application:
    async def refused(request: web.Request) -> web.Response:
        raise Refusal(429, "rate_limited", "slow down", {"Retry-After": "3"})

    async def redis_down(request: web.Request) -> web.Response:
        raise RedisConnectionError("connection refused")

    async def bug(request: web.Request) -> web.Response:
        raise RuntimeError("a bug")

    async def gone(request: web.Request) -> web.Response:
        raise ArchiveUnavailable("the archive is away")

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPSeeOther("/elsewhere")

    errors = json_errors(codes=CODES, unavailable="Redis is away; retry", internal="our fault; retry",
                         count=lambda route, status: counted.append((route, status)), **more)  # type: ignore[arg-type]
    app = web.Application(middlewares=[errors])
    for path, handler in (("/refused/{x}", refused), ("/redis", redis_down), ("/bug", bug), ("/gone", gone),
                          ("/redirect", redirect)):
        app.router.add_get(path, handler)
    return app


async def test_every_error_is_json_with_its_status_and_every_request_is_counted_by_route() -> None:
    counted: list[tuple[str, int]] = []
    async with TestClient(TestServer(_app(counted))) as client:
        resp = await client.get("/refused/1")
        assert resp.status == 429 and resp.headers["Retry-After"] == "3"
        assert await resp.json() == {"error": "rate_limited", "message": "slow down"}
        resp = await client.get("/redis")
        assert resp.status == 503 and resp.headers["Retry-After"] == "2"
        assert await resp.json() == {"error": "unavailable", "message": "Redis is away; retry"}
        resp = await client.get("/bug")
        assert resp.status == 500 and await resp.json() == {"error": "internal", "message": "our fault; retry"}
        resp = await client.get("/gone")
        assert resp.status == 503 and resp.headers["Retry-After"] == "5"
        assert (await resp.json())["error"] == "archive_unavailable"
        resp = await client.get("/nowhere/at/all")
        assert resp.status == 404 and await resp.json() == {"error": "not_found", "message": "no such route"}
        resp = await client.post("/bug")
        assert resp.status == 405 and "GET" in resp.headers["Allow"]
        assert (await resp.json())["error"] == "method_not_allowed"
        resp = await client.get("/redirect", allow_redirects=False)
        assert resp.status == 303
    assert counted == [("/refused/{x}", 429), ("/redis", 503), ("/bug", 500), ("/gone", 503), ("unmatched", 404),
                       ("unmatched", 405), ("/redirect", 303)]


async def test_a_service_may_shape_its_error_bodies() -> None:
    def shape(request: web.Request, refusal: Refusal) -> web.Response | None:
        if not request.path.startswith("/v1/"):
            return None  # the plain body
        return web.json_response({"error": {"code": refusal.code}}, status=refusal.status)

    async with TestClient(TestServer(_app([], shape=shape))) as client:
        assert await (await client.get("/v1/nothing")).json() == {"error": {"code": "not_found"}}
        assert (await (await client.get("/nothing")).json())["error"] == "not_found"


async def test_a_probe_answers_the_first_failing_check_else_ok_with_its_info(redis: Redis) -> None:
    down = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    clients = web.AppKey("clients", list)
    flag = web.AppKey("flag", dict)

    async def flagged(app: web.Application) -> Problem | None:
        return Problem("flagged", "the flag is up") if app[flag]["up"] else None

    async def info(app: web.Application) -> Health:
        return Health(status="ok", listeners=3)

    app = web.Application()
    app[clients], app[flag] = [redis], {"up": False}
    app.router.add_get("/readyz", probe(flagged, redis_answers(lambda a: a[clients][0], Problem("redis", "no")),
                                        info=info))
    async with TestClient(TestServer(app)) as client:
        resp = await client.get("/readyz")
        assert resp.status == 200 and await resp.json() == {"status": "ok", "listeners": 3}
        app[clients][0] = down
        resp = await client.get("/readyz")
        assert resp.status == 503 and await resp.json() == {"error": "redis", "message": "no"}
        app[flag]["up"] = True  # checks run in order: the first problem answers
        assert await (await client.get("/readyz")).json() == {"error": "flagged", "message": "the flag is up"}
    await down.aclose()


async def test_metrics_live_on_their_own_registry_per_instance() -> None:
    class Things(ServiceMetrics):
        def __init__(self) -> None:
            super().__init__()
            self.things = Counter("things", "things", registry=self.registry)
            self.requests = RequestCounter("things_requests_total", self.registry)

    a, b = Things(), Things()  # the same names twice in one process: no clash
    a.things.inc()
    a.requests("/x/{id}", 200)
    a.requests("/x/{id}", 200)
    text = generate_latest(a.registry).decode()
    assert "things_total 1.0" in text and 'things_requests_total{route="/x/{id}",status="200"} 2.0' in text
    assert "process_" in text or sys.platform != "linux"  # the dashboard's service panels read these
    assert "things_total 0.0" in generate_latest(b.registry).decode()
    async with TestClient(TestServer(_served(a))) as client:
        resp = await client.get("/metrics")
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
        assert "things_total 1.0" in await resp.text()


def _served(metrics: ServiceMetrics) -> web.Application:
    app = web.Application()
    app.router.add_get("/metrics", metrics.view)
    return app


# A service as `python -m` runs it: an app with a cleanup_ctx and a task, under servicekit.run.
SERVICE = """
import asyncio, logging, sys
from aiohttp import web
from servicekit import Serving, run, setup_logging

TASK = web.AppKey("task", asyncio.Task)
mode, port = sys.argv[1], int(sys.argv[2])

async def work():
    if mode == "fail":
        raise RuntimeError("the worker broke")
    if mode == "finish":
        return
    await asyncio.Event().wait()

async def ctx(app):
    app[TASK] = asyncio.create_task(work())
    yield
    app[TASK].cancel()
    print("cleaned up", flush=True)

setup_logging()
app = web.Application()
app.cleanup_ctx.append(ctx)
app.router.add_get("/healthz", lambda request: web.json_response({"status": "ok"}))
until = None if mode == "plain" else lambda app: app[TASK]
run(app, Serving("demo", "127.0.0.1", port, 5.0, until=until, hard_exit=mode == "fail"))
"""


def _start(mode: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "libs"), str(REPO / "services"),
                                                         os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", SERVICE, mode, str(port)], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return proc, port


async def _wait_ready(proc: subprocess.Popen[bytes], port: int) -> None:
    for _ in range(1200):  # a minute: importing aiohttp on a loaded 2-core machine took over 20 s once
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            await asyncio.sleep(0.05)
    raise AssertionError("the service did not come up")


def _finish(proc: subprocess.Popen[bytes]) -> str:
    try:
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out.decode()


@pytest.mark.parametrize("mode", ["plain", "watch"])
async def test_sigterm_stops_the_service_gracefully_with_status_0(mode: str) -> None:
    proc, port = _start(mode)
    await _wait_ready(proc, port)
    proc.send_signal(signal.SIGTERM)
    out = await asyncio.to_thread(_finish, proc)
    assert proc.returncode == 0, out
    assert "demo ready on http://127.0.0.1:" in out and "cleaned up" in out and "demo stopped" in out


@pytest.mark.parametrize(("mode", "status"), [("finish", 0), ("fail", 1)])
async def test_the_process_ends_with_its_watched_task_and_a_failure_exits_1(mode: str, status: int) -> None:
    proc, _ = _start(mode)
    out = await asyncio.to_thread(_finish, proc)
    assert proc.returncode == status, out
    assert "cleaned up" in out and "demo stopped" in out
    assert ("the worker broke" in out) is (mode == "fail")
