"""docs/metrics.md is the list of every metric: each service's /metrics, scraped through its
real app factory, serves exactly the `streamtts_*` names documented for it."""

from __future__ import annotations

import re
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from redis.asyncio import Redis

import edge
import intake
from castlog import VoiceList, publish_voices
from synth.app import create_app as create_synth
from synth.context import SYNTH
from tests.synth.support import StandIn, config, wait_until

METRICS_MD = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"


def documented(sections: tuple[str, ...]) -> set[str]:
    """The metric names of these `## <section>`s of docs/metrics.md."""
    names: set[str] = set()
    for part in re.split(r"^## ", METRICS_MD.read_text(encoding="utf-8"), flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        if title.strip().split(" ")[0] in sections or title.strip() in sections:
            names |= set(re.findall(r"^\| `(streamtts_\w+)`", body, re.M))
    return names


def served(exposition: str) -> set[str]:
    """The metric families of a Prometheus text exposition (from its # TYPE lines)."""
    names = set()
    types = re.findall(r"^# TYPE (streamtts_\w+) (\w+)$", exposition, re.M)
    families = {name for name, _ in types}
    for name, kind in types:
        if name.endswith("_created") and name.removesuffix("_created") in families | {
                f.removesuffix("_total") for f in families}:
            continue  # the client library's creation time of a counter or histogram
        names.add(f"{name}_total" if kind == "counter" and not name.endswith("_total") else name)
    return names


async def scrape(client: TestClient) -> str:  # type: ignore[type-arg]
    resp = await client.get("/metrics")
    assert resp.status == 200
    return await resp.text()


def assert_same(service: str, sections: tuple[str, ...], exposition: str) -> None:
    names = served(exposition)
    expected = documented(("every", *sections))
    assert names - expected == set(), f"{service} serves metrics docs/metrics.md does not list"
    assert expected - names == set(), f"docs/metrics.md lists metrics {service} does not serve"
    assert re.search(rf'^streamtts_build_info{{service="{service}",version="[^"]+"}} 1\.0$', exposition, re.M) \
        or re.search(rf'^streamtts_build_info{{version="[^"]+",service="{service}"}} 1\.0$', exposition, re.M)


async def test_intake_serves_exactly_its_documented_metrics(redis: Redis, redis_url: str) -> None:
    app = intake.create_app(intake.Config(redis_url=redis_url, redis_connect_attempts=3))
    async with TestClient(TestServer(app)) as client:
        assert_same("intake", ("intake",), await scrape(client))


async def test_edge_serves_exactly_its_documented_metrics(redis: Redis, redis_url: str) -> None:
    app = edge.create_app(edge.Config(redis_url=redis_url, redis_connect_attempts=3))
    async with TestClient(TestServer(app)) as client:
        assert_same("edge", ("edge",), await scrape(client))


async def test_synth_serves_exactly_its_documented_metrics(redis: Redis, redis_url: str) -> None:
    offer = VoiceList(voices=("af_heart",), default="af_heart", backend="standin", worker="w", at=1)
    await publish_voices(redis, offer, maxlen=10)
    app = create_synth(config(redis_url=redis_url), load=lambda _cfg: StandIn())
    async with TestClient(TestServer(app)) as client:
        await wait_until(lambda: app[SYNTH].service.phase == "running", 10)
        assert_same("synth", ("synth", "archive"), await scrape(client))


def test_the_check_sees_an_undocumented_metric() -> None:
    """Before: edge served streamtts_edge_tail_rewinds_total, which the list lacked."""
    exposition = "# TYPE streamtts_edge_tail_rewinds counter\n# TYPE streamtts_edge_listeners gauge\n"
    assert "streamtts_edge_tail_rewinds_total" in served(exposition)
    assert "streamtts_edge_made_up_total" not in documented(("edge",))
