"""Finding 9 of #35: durable streams had no owner. Anyone (any key holder, with keys set) appended
to, closed, deleted, forked or took over another's stream, and raised its producer's epoch to
2^53-1 (the owner's producer refused for ever, the header a float). A stream is its creator's
now: the API key's when keys are set, else the client's address. Client B is refused every write
on A's stream (403 `not_owner`, nothing written) and A's stream works on; with keys set a read
wants a key too, and the casts' streams stay public. Clients are told apart by loopback address
(through the real front proxy, as `streamtts up` serves them)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import ClientSession, TCPConnector
from redis.asyncio import Redis

from durablestreams.keys import producers_key
from durablestreams.scripts import MAX_EPOCH_STEP
from tests.durable.conftest import serving_origin

A, B = "127.0.0.2", "127.0.0.3"
KEY_A, KEY_B = "owner-a-key-0123456789-0123456789-ab", "owner-b-key-0123456789-0123456789-ab"
TEXT = {"Content-Type": "text/plain"}
MAX_SAFE_INTEGER = 2**53 - 1


@asynccontextmanager
async def client(address: str, key: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"} if key else None
    async with ClientSession(connector=TCPConnector(local_addr=(address, 0)), headers=headers) as http:
        yield http


def producer(epoch: int, seq: int) -> dict[str, str]:
    return {"Producer-Id": "writer", "Producer-Epoch": str(epoch), "Producer-Seq": str(seq), **TEXT}


async def _every_write_refused(stranger: ClientSession, url: str, redis: Redis) -> None:
    """Each write B could try on A's stream: 403 ``not_owner``, and no trace in Redis."""
    before = sorted(await redis.keys("ds/*"))
    attempts: list[tuple[str, str, dict[str, Any]]] = [
        ("PUT", url, {"headers": TEXT}),  # the same configuration: would be 200, the stream B's to use
        ("POST", url, {"headers": TEXT, "data": b"not yours"}),
        ("POST", url, {"headers": {"Stream-Closed": "true"}}),
        ("POST", url, {"headers": producer(MAX_SAFE_INTEGER, 0), "data": b"epoch"}),
        ("POST", url, {"headers": {"Content-Type": "application/json"}, "data": b"{bad json"}),
        ("DELETE", url, {}),
        ("PUT", url + "-fork", {"headers": {"Stream-Forked-From": url[url.index("/v1/stream/"):]},
                                "skip_auto_headers": ["Content-Type"]}),
    ]
    for method, target, kwargs in attempts:
        async with stranger.request(method, target, **kwargs) as response:
            assert response.status == 403, (method, kwargs)
            assert (await response.json())["error"]["code"] == "not_owner", (method, kwargs)
    assert sorted(await redis.keys("ds/*")) == before  # no fork, no link, no producer, no close


async def _owner_still_writes(owner: ClientSession, url: str) -> None:
    async with owner.post(url, headers=producer(0, 1), data=b" and more") as response:
        assert response.status == 200, await response.text()
        assert (response.headers["Producer-Epoch"], response.headers["Producer-Seq"]) == ("0", "1")
    async with owner.get(url) as response:
        assert await response.read() == b"mine! and more"
    async with owner.put(url + "-fork", headers={"Stream-Forked-From": url[url.index("/v1/stream/"):]},
                         skip_auto_headers=["Content-Type"]) as response:
        assert response.status == 201
    for target in (url + "-fork", url):
        async with owner.delete(target) as response:
            assert response.status == 204


async def _create(owner: ClientSession, url: str) -> None:
    async with owner.put(url, headers=TEXT, data=b"mine") as response:
        assert response.status == 201
    async with owner.post(url, headers=producer(0, 0), data=b"!") as response:
        assert response.status == 200


@pytest.mark.rule("ds-owners")
async def test_another_address_cannot_write_an_addresss_stream(redis: Redis, redis_url: str) -> None:
    async with serving_origin(redis, redis_url) as base, client(A) as a, client(B) as b:
        url = f"{base}/v1/stream/owned"
        await _create(a, url)
        await _every_write_refused(b, url, redis)
        async with b.get(url) as response:  # reads stay open without keys
            assert response.status == 200 and await response.read() == b"mine!"
        await _owner_still_writes(a, url)
    assert await redis.keys("ds/*owned*") == []  # the fork's link went with it


@pytest.mark.rule("ds-owners", "ds-read-keys")
async def test_with_keys_a_stream_is_its_keys_and_a_read_wants_one(redis: Redis, redis_url: str) -> None:
    keys = frozenset({KEY_A, KEY_B})
    async with serving_origin(redis, redis_url, intake_changes={"api_keys": keys}, edge_changes={"api_keys": keys}) \
            as base, client(A, KEY_A) as a, client(A, KEY_B) as b, client(A) as nobody:
        url = f"{base}/v1/stream/keyed"
        await _create(a, url)
        await _every_write_refused(b, url, redis)  # the same address, another key
        for method in ("GET", "HEAD"):
            async with nobody.request(method, url) as response:
                assert response.status == 401, method
        async with nobody.get(url) as response:
            assert (await response.json())["error"] == "invalid_api_key"  # edge's shape
        async with b.get(url) as response:  # any key holder reads
            assert response.status == 200 and await response.read() == b"mine!"
        async with nobody.get(f"{base}/v1/stream/casts/AAAAAAAAAAAA") as response:  # casts stay public
            assert response.status == 404
        await _owner_still_writes(a, url)
        assert await redis.keys("ds/*keyed*") == []


@pytest.mark.rule("ds-producer")
async def test_a_producers_epoch_is_bounded_and_answered_as_an_integer(origin: str, redis: Redis) -> None:
    async with ClientSession() as http:
        url = f"{origin}/v1/stream/epochs"
        async with http.put(url, headers=TEXT) as response:
            assert response.status == 201
        async with http.post(url, headers=producer(MAX_EPOCH_STEP + 1, 0), data=b"x") as response:
            assert response.status == 400  # a new producer starts at most MAX_EPOCH_STEP high
        async with http.post(url, headers=producer(3, 0), data=b"x") as response:
            assert response.status == 200
        async with http.post(url, headers=producer(3 + MAX_EPOCH_STEP + 1, 0), data=b"y") as response:
            assert response.status == 400
            assert (await response.json())["error"]["code"] == "bad_request"
        async with http.post(url, headers=producer(3 + MAX_EPOCH_STEP, 0), data=b"y") as response:
            assert response.status == 200
        # an epoch stored high (2^53-1, as the attack left it): answered as the integer it is
        await redis.hset(producers_key("epochs"), "writer", f"{MAX_SAFE_INTEGER}:{MAX_SAFE_INTEGER - 1}")
        async with http.post(url, headers=producer(0, 0), data=b"z") as response:
            assert response.status == 403
            assert response.headers["Producer-Epoch"] == str(MAX_SAFE_INTEGER)
        async with http.post(url, headers=producer(MAX_SAFE_INTEGER, 0), data=b"z") as response:
            assert response.status == 204  # a duplicate: the last seq, as an integer
            assert response.headers["Producer-Seq"] == str(MAX_SAFE_INTEGER - 1)
        async with http.get(url) as response:
            assert await response.read() == b"xy"
