"""Durable Streams' writes per client with no API keys set, through intake's real app factory:
the streams a client creates (429 ``streams_quota``) and the bytes it writes (413
``bytes_quota``), each refused before the body is read once spent, with nothing written; other
clients (told apart by X-Forwarded-For from the trusted loopback proxy) keep theirs; key holders
have no quota."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from durablestreams.streams import DurableStreams

from .conftest import MakeClient

TEXT = {"Content-Type": "text/plain"}
KEY = "k" * 40

pytestmark = pytest.mark.rule("ds-quota")


def _from(client: str, **headers: str) -> dict[str, str]:
    return {**TEXT, "X-Forwarded-For": client, **headers}


async def _ds_keys(redis: Redis) -> set[str]:
    return {k.decode() for k in await redis.keys("ds/*")}


async def test_a_client_creates_at_most_its_streams_then_429_and_nothing_is_created(
    make_client: MakeClient, redis: Redis
) -> None:
    client = await make_client(ds_streams_per_client=3)
    for n in range(3):
        response = await client.put(f"/v1/stream/q{n}", headers=_from("10.0.0.1"), data=b"x")
        assert response.status == 201
    before = await _ds_keys(redis)
    response = await client.put("/v1/stream/q3", headers=_from("10.0.0.1"), data=b"x")
    assert response.status == 429
    body = await response.json()
    assert body["error"]["code"] == "streams_quota" and int(response.headers["Retry-After"]) > 0
    assert await _ds_keys(redis) == before, "nothing of the refused stream is in Redis"
    response = await client.put("/v1/stream/q4", headers=_from("10.0.0.2"), data=b"x")
    assert response.status == 201, "another client keeps its own quota"


async def test_a_client_writes_at_most_its_bytes_then_413_and_nothing_is_appended(
    make_client: MakeClient, redis: Redis
) -> None:
    client = await make_client(ds_bytes_per_client=1000)
    assert (await client.put("/v1/stream/b", headers=_from("10.0.0.1"), data=b"a" * 600)).status == 201
    assert (await client.post("/v1/stream/b", headers=_from("10.0.0.1"), data=b"b" * 300)).status == 204
    response = await client.post("/v1/stream/b", headers=_from("10.0.0.1"), data=b"c" * 300)
    assert response.status == 413
    assert (await response.json())["error"]["code"] == "bytes_quota" and "Retry-After" in response.headers
    streams = DurableStreams(redis)
    found = await streams.open("b", touch=False)
    assert found.meta is not None
    got = await streams.read(found.meta, "0-0", 10_000)
    assert b"".join(d for _, d in got.entries) == b"a" * 600 + b"b" * 300
    response = await client.put("/v1/stream/b2", headers=_from("10.0.0.2"), data=b"d" * 300)  # (b is 10.0.0.1's)
    assert response.status == 201, "another client keeps its own bytes"


async def test_a_spent_quota_refuses_before_the_body_is_read(make_client: MakeClient) -> None:
    client: TestClient[Any, Any] = await make_client(ds_bytes_per_client=1000, body_timeout_s=30.0)
    assert (await client.put("/v1/stream/p", headers=_from("10.0.0.1"), data=b"a" * 1000)).status == 201
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(b"POST /v1/stream/p HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\n"
                 b"X-Forwarded-For: 10.0.0.1\r\nContent-Length: 500\r\n\r\n")  # and no body, ever
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 10)  # answered at once, not after 30 s
    writer.close()
    assert b" 413 " in status


async def test_key_holders_have_no_quota(make_client: MakeClient) -> None:
    client = await make_client(ds_streams_per_client=1, ds_bytes_per_client=10, api_keys=frozenset({KEY}))
    for n in range(3):
        response = await client.put(f"/v1/stream/k{n}", headers=_from("10.0.0.1", Authorization=f"Bearer {KEY}"),
                                    data=b"x" * 100)
        assert response.status == 201
