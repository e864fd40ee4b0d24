"""Edge's metrics off the public port (EDGE_METRICS_PORT), with the process_* series."""

from __future__ import annotations

from aiohttp import ClientSession

from streamtts.redisserver import free_port
from tests.support.apps import MakeClient


async def test_metrics_on_their_own_port_and_not_on_the_public_one(make_edge: MakeClient) -> None:
    port = free_port()
    edge = await make_edge(metrics_port=port)
    assert (await edge.get("/metrics")).status == 404
    assert (await edge.get("/healthz")).status == 200
    async with ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as resp:
        assert resp.status == 200
        text = await resp.text()
    assert "streamtts_edge_requests_total" in text and "process_resident_memory_bytes" in text


async def test_metrics_stay_on_the_public_port_by_default(make_edge: MakeClient) -> None:
    edge = await make_edge()
    resp = await edge.get("/metrics")
    assert resp.status == 200 and "process_cpu_seconds_total" in await resp.text()
