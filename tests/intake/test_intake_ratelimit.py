"""Per-client token buckets kept in Redis: 429 with Retry-After, shared by replicas."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from jobstreams import read_jobs
from redis.asyncio import Redis

from castlog import Verdict
from intake.limits import Cooldowns

from .conftest import MakeClient, key_names

Client = TestClient[Any, Any]
# Two at once, then one every 100 s: the third request in a test is always refused.
TIGHT = {"rate": 0.01, "burst": 2}


async def submit(client: Client, text: str, forwarded_for: str | None = None) -> Any:
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    return await client.post("/api/casts", json={"text": text}, headers=headers)


async def test_client_over_its_burst_gets_429_with_retry_after(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(**TIGHT)
    assert (await submit(client, "One.")).status == 201
    assert (await submit(client, "Two.")).status == 201
    refused = await submit(client, "Three.")
    assert refused.status == 429
    assert await refused.json() == {"error": "rate_limited", "message": "too many submissions; retry in 100 s"}
    assert refused.headers["Retry-After"] == "100"
    assert len(await read_jobs(redis)) == 2
    assert "rl/intake/127.0.0.1" in await key_names(redis)
    metrics = await (await client.get("/metrics")).text()
    assert "streamtts_intake_rate_limited_total 1.0" in metrics
    assert 'streamtts_intake_requests_total{route="/api/casts",status="429"} 1.0' in metrics


@pytest.mark.rule("refusal-json-no-key")
async def test_an_invalid_request_spends_no_token_and_touches_no_key(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(max_body_bytes=4000, **TIGHT)
    for _ in range(3):
        bad = await client.post("/api/casts", data=b"not json", headers={"Content-Type": "application/json"})
        assert bad.status == 400
    oversized = await client.post("/api/casts", json={"text": "x" * 5000})
    assert oversized.status == 413
    assert await key_names(redis) == set()  # not even a bucket
    assert (await submit(client, "One.")).status == 201
    assert (await submit(client, "Two.")).status == 201
    assert (await submit(client, "Three.")).status == 429


async def test_a_limited_client_is_refused_before_its_body_is_read_until_its_wait_ends(
    make_client: MakeClient, redis: Redis
) -> None:
    client = await make_client(rate=2.0, burst=1)  # a token every 500 ms
    assert (await submit(client, "One.")).status == 201
    assert (await submit(client, "Two.")).status == 429
    # A malformed body answered 429, not 400: refused without reading it, and without Redis.
    bucket_before = await redis.hgetall("rl/intake/127.0.0.1")
    again = await client.post("/api/casts", data=b"not json", headers={"Content-Type": "application/json"})
    assert again.status == 429 and again.headers["Retry-After"] == "1"
    assert (await again.json())["error"] == "rate_limited"
    assert await redis.hgetall("rl/intake/127.0.0.1") == bucket_before
    await asyncio.sleep(0.6)
    assert (await submit(client, "Three.")).status == 201
    metrics = await (await client.get("/metrics")).text()
    assert "streamtts_intake_rate_limited_total 2.0" in metrics


async def test_clients_behind_a_trusted_proxy_have_their_own_buckets(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(**TIGHT)  # the test client connects from 127.0.0.1, trusted by default
    for text in ("A1.", "A2."):
        assert (await submit(client, text, "203.0.113.7")).status == 201
    assert (await submit(client, "A3.", "203.0.113.7")).status == 429
    assert (await submit(client, "B1.", "198.51.100.1, 203.0.113.9")).status == 201
    assert {"rl/intake/203.0.113.7", "rl/intake/203.0.113.9"} <= await key_names(redis)


async def test_forwarded_for_from_an_untrusted_peer_is_ignored(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(forwarded_allow_ips=frozenset(), **TIGHT)
    assert (await submit(client, "A1.", "203.0.113.7")).status == 201
    assert (await submit(client, "B1.", "203.0.113.8")).status == 201
    assert (await submit(client, "C1.", "203.0.113.9")).status == 429
    assert {k for k in await key_names(redis) if k.startswith("rl/")} == {"rl/intake/127.0.0.1"}


@pytest.mark.rule("rate-limit-shared")
async def test_replicas_share_one_bucket_per_client(make_client: MakeClient) -> None:
    first, second = await make_client(**TIGHT), await make_client(**TIGHT)
    assert (await submit(first, "One.")).status == 201
    assert (await submit(second, "Two.")).status == 201
    assert (await submit(first, "Three.")).status == 429
    assert (await submit(second, "Four.")).status == 429


async def test_reads_are_not_rate_limited(make_client: MakeClient) -> None:
    client = await make_client(**TIGHT)
    for _ in range(5):
        assert (await client.get("/api/voices")).status == 200
    assert (await submit(client, "One.")).status == 201


def test_cooldowns_end_with_the_wait_and_stay_bounded() -> None:
    now = [100.0]
    cooldowns = Cooldowns(size=2, clock=lambda: now[0])
    refused = Verdict(False, 2, 1500)
    cooldowns.refused("a", 99.9, refused)  # Redis was asked at 99.9: the wait ends at 101.4
    assert cooldowns.wait_s("a") == 2 and cooldowns.wait_s("b") == 0
    now[0] = 101.3
    assert cooldowns.wait_s("a") == 1
    now[0] = 101.5
    assert cooldowns.wait_s("a") == 0 and len(cooldowns) == 0  # over: forgotten
    for client in ("a", "b", "c"):
        cooldowns.refused(client, now[0], refused)
    assert len(cooldowns) == 2 and cooldowns.wait_s("a") == 0 and cooldowns.wait_s("c") == 2
