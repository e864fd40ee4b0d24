"""The synth process through its real app factory: start-up (voices published, /healthz),
/metrics with every name docs/metrics.md lists, and a graceful stop."""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from redis.asyncio import Redis

import castlog
from castlog import CastStore
from synth.app import create_app
from synth.config import SynthConfig
from synth.context import SYNTH
from synth.service import choose_default_voice
from tests.synth.support import StandIn, config, submit, terminal, wait_until

METRICS_DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def synth_metric_names() -> list[str]:
    """The metric names of the synth section of docs/metrics.md (counters with ``_total``)."""
    section = METRICS_DOC.read_text(encoding="utf-8").split("## synth", 1)[1]
    return re.findall(r"^\| `([a-z_]+)`", section, flags=re.M)


def sample_values(exposition: str) -> dict[str, float]:
    """``name{labels}`` -> value of every sample in a Prometheus text exposition."""
    return {m[1]: float(m[2]) for m in re.finditer(r"^([a-z_]+(?:\{[^}]*\})?) (\S+)$", exposition, flags=re.M)}


async def test_worker_publishes_voices_serves_healthz_and_every_documented_metric(
    redis: Redis, store: CastStore, redis_url: str
) -> None:
    cfg = config(redis_url=redis_url, default_voice="nope")
    app = create_app(cfg, load=lambda _cfg: StandIn())
    async with TestClient(TestServer(app)) as client:
        await wait_until(lambda: app[SYNTH].service.phase == "running", 10)
        health = await client.get("/readyz")
        assert health.status == 200
        assert (await health.json())["consumer"] == cfg.consumer
        assert (await client.get("/healthz")).status == 200

        offer = await castlog.read_voices(redis, 1)
        assert offer is not None and offer.voices == ("af_heart", "jf_alpha")
        assert offer.default == "af_heart"  # "nope" is not a voice: the first one
        assert offer.backend == "standin" and offer.worker == cfg.consumer

        before = sample_values(await (await client.get("/metrics")).text())
        cast_id = await submit(store, "Hello there. This is a post deployment check.")
        await terminal(store, cast_id)

        async def scraped() -> str:
            text = await (await client.get("/metrics")).text()
            return text if "streamtts_synth_queue_depth 0.0" in text else ""

        await wait_until(scraped, 10)
        body = await scraped()
        for name in synth_metric_names():
            assert re.search(rf"^{name}(_bucket|_count|_sum)?({{| )", body, flags=re.M), name
        after = sample_values(body)
        # Metrics are per process and other tests ran before: compare the deltas.
        grew = {name: after[name] - before.get(name, 0.0) for name in after}
        assert grew["streamtts_synth_attempts_total"] == 1
        assert grew["streamtts_synth_time_to_first_audio_seconds_count"] == 1
        assert grew['streamtts_synth_chunk_seconds_count{stage="encode"}'] == 2
        assert grew['streamtts_synth_chunk_seconds_count{stage="synth"}'] == 2
        assert grew["streamtts_synth_dead_letters_total"] == 0
    task = app[SYNTH].task
    assert task.done() and task.exception() is None and app[SYNTH].service.phase == "stopped"


async def test_healthz_is_503_while_the_model_loads_and_a_failed_load_ends_the_service(
    redis: Redis, redis_url: str
) -> None:
    def broken(_cfg: SynthConfig) -> StandIn:
        raise RuntimeError("no weights here")

    app = create_app(config(redis_url=redis_url), load=broken)
    async with TestClient(TestServer(app)) as client:
        await wait_until(lambda: app[SYNTH].task.done(), 10)
        for path in ("/healthz", "/readyz"):  # not alive any more, so not ready either
            health = await client.get(path)
            assert health.status == 503
            assert (await health.json()) == {"error": "failed", "message": "the worker failed to start; see its log"}
        assert isinstance(app[SYNTH].task.exception(), RuntimeError)


async def test_while_the_model_loads_it_is_alive_but_not_ready(redis: Redis, redis_url: str) -> None:
    gate = threading.Event()

    def slow(_cfg: SynthConfig) -> StandIn:
        gate.wait(10)
        return StandIn()

    app = create_app(config(redis_url=redis_url), load=slow)
    async with TestClient(TestServer(app)) as client:
        assert (await client.get("/healthz")).status == 200
        ready = await client.get("/readyz")
        assert ready.status == 503 and (await ready.json())["error"] == "loading"
        gate.set()
        await wait_until(lambda: app[SYNTH].service.phase == "running", 10)
        assert (await client.get("/readyz")).status == 200


def test_the_default_voice_is_one_the_model_has_and_only_a_missing_asked_one_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="synth.service"):
        assert choose_default_voice("", ["jf_alpha", "jm_kumo"]) == "jf_alpha"
        assert choose_default_voice("", ["af_bella", "af_heart"]) == "af_heart"
        assert caplog.records == []  # unset: no warning on every start
        assert choose_default_voice("jm_kumo", ["jf_alpha", "jm_kumo"]) == "jm_kumo"
        assert choose_default_voice("af_sky", ["jf_alpha", "jm_kumo"]) == "jf_alpha"
    assert [r.getMessage() for r in caplog.records] == [
        "SYNTH_DEFAULT_VOICE=af_sky is not among this model's voices; the default is jf_alpha"
    ]
