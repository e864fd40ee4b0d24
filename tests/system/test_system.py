"""The three services as separate processes, as compose runs them, with the real model.

One cast goes in through intake, comes out of edge while synth makes it, and Prometheus,
scraping all three, answers the dashboard's time-to-first-audio query.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import ClientSession, ClientTimeout

from tests.deploy.dashboard import dashboard_metric_names
from tests.deploy.prometheus_server import running_prometheus
from tests.support.system import System

pytestmark = [pytest.mark.model, pytest.mark.timeout(300)]

TTFA_P50 = "histogram_quantile(0.5, sum(rate(streamtts_synth_time_to_first_audio_seconds_bucket[1m])) by (le))"


async def _sse_records(http: ClientSession, url: str) -> list[dict]:
    records, event = [], {}
    async with http.get(url) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("data:"):
                event["data"] = json.loads(line[5:].strip())
            elif line == "" and "data" in event:
                records.append(event["data"])
                event = {}
    return records


async def test_a_cast_flows_from_intake_through_synth_to_edge_and_prometheus(system: System, texts: dict[str, str]) -> None:
    from mp3decode import decode_mp3

    targets = {name: [f"127.0.0.1:{port}"] for name, port in system.ports.items()}
    with running_prometheus(targets, scrape_interval="1s") as prometheus:
        prometheus.wait_for_targets(timeout=30)
        async with ClientSession(timeout=ClientTimeout(total=240)) as http:
            async with http.get(system.url("intake", "/api/voices")) as response:
                voices = await response.json()
            assert voices["default"] == "af_heart"  # the npm packs in KOKORO_MODEL_DIR
            text = texts["short"].strip()  # no other test speaks it here: the cast is made while Prometheus scrapes
            async with http.post(system.url("intake", "/api/casts"), json={"text": text, "voice": voices["default"]}) as response:
                assert response.status == 201, await response.text()
                created = await response.json()
            records = await _sse_records(http, system.url("edge", f"/api/casts/{created['id']}/events?seq_num=0"))
            kinds = [r["kind"] for r in records]
            assert kinds[0] == "meta" and kinds[1] == "start" and kinds[-1] == "eos"
            audio = [r for r in records if r["kind"] == "audio"]
            assert [a["headers"]["i"] for a in audio] == list(range(records[0]["headers"]["sentences"]))
            assert " ".join(a["headers"]["t"] for a in audio).split() == text.split()
            async with http.get(system.url("edge", f"/api/casts/{created['id']}/audio.mp3")) as response:
                mp3 = await response.read()
            total_ms = sum(a["headers"]["d"] for a in audio)
            assert abs(len(decode_mp3(mp3)) - total_ms * 24) <= 576  # within one MP3 frame

            exposed = ""
            for name in system.ports:
                async with http.get(system.url(name, "/metrics")) as response:
                    exposed += await response.text()
        missing = sorted(name for name in dashboard_metric_names() if name not in exposed)
        assert missing == [], f"the dashboard uses metrics no service exports: {missing}"
        ttfa = await asyncio.to_thread(prometheus.wait_for_value, TTFA_P50, 30)
        assert 0 < ttfa < 120
