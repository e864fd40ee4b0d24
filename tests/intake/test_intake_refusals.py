"""Every refusal is a 4xx with JSON {error, message} and leaves no key in Redis, not even a rate limit's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from jobstreams import read_jobs
from redis.asyncio import Redis

import castlog
from intake.context import INTAKE

from .conftest import MakeClient, key_names, keys_besides_rate_limits

Client = TestClient[Any, Any]
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"

# (path, content type, body, status, error code); the app runs with max_chars=100,
# max_title_chars=200 and max_body_bytes=4000.
BAD_REQUESTS: list[tuple[str, str | None, bytes, int, str]] = [
    ("/api/casts", "text/plain", b"Hello there.", 415, "unsupported_media_type"),
    ("/api/casts", None, b'{"text": "Hello."}', 415, "unsupported_media_type"),
    ("/api/casts", FORM, b"text=Hello.", 415, "unsupported_media_type"),
    ("/api/casts", "application/json; charset=latin-1", b'{"text": "Hello."}', 415, "unsupported_media_type"),
    ("/generate", "multipart/form-data; boundary=x", b"--x--", 415, "unsupported_media_type"),
    ("/api/casts", JSON, b"", 400, "malformed_json"),
    ("/api/casts", JSON, b'{"text": "Hello.', 400, "malformed_json"),
    ("/api/casts", JSON, b'{"text": "caf\xe9"}', 400, "malformed_json"),  # Latin-1, not UTF-8
    ("/api/casts", JSON, b'{"text": "\\ud800 lone surrogate"}', 400, "malformed_json"),
    ("/api/casts", JSON, b"[" * 3000, 422, "invalid_field"),  # the type is wrong at the first byte
    ("/api/casts", JSON, b'{"text": "Hi.", "x": ' + b"[" * 1500 + b"]" * 1500 + b"}", 422, "invalid_field"),  # refused as unknown before its depth is read
    ("/api/casts", JSON, b'["Hello."]', 422, "invalid_field"),
    ("/api/casts", JSON, b'"Hello."', 422, "invalid_field"),
    ("/api/casts", JSON, b'{"voice": "af_heart"}', 422, "invalid_field"),
    ("/api/casts", JSON, b'{"text": 5}', 422, "invalid_field"),
    ("/api/casts", JSON, b'{"text": null}', 422, "invalid_field"),
    ("/api/casts", JSON, b'{"text": ["Hello."]}', 422, "invalid_field"),
    ("/api/casts", JSON, b'{"text": "Hello.", "voice": 7}', 422, "invalid_field"),
    ("/api/casts", JSON, b'{"text": "Hello.", "title": {"a": 1}}', 422, "invalid_field"),
    ("/api/casts", JSON, b'{"text": "   \\n\\t  "}', 422, "empty_text"),
    ("/api/casts", JSON, b'{"text": "\\u0000\\u0007\\u009f"}', 422, "empty_text"),
    ("/api/casts", JSON, b'{"text": "' + b"a" * 101 + b'"}', 413, "text_too_long"),
    ("/api/casts", JSON, b'{"text": "Hello.", "title": "' + b"t" * 201 + b'"}', 422, "title_too_long"),
    ("/api/casts", JSON, b'{"text": "Hello.", "voice": "nobody"}', 422, "unknown_voice"),
    ("/api/casts", JSON, b'{"text": "' + b"a" * 5000 + b'"}', 413, "body_too_large"),
    ("/generate", FORM, b"text=%FF%FE", 400, "malformed_form"),
    ("/generate", FORM, b"text=" + "é".encode("latin-1"), 400, "malformed_form"),
    ("/generate", FORM, b"&".join(b"f%d=1" % i for i in range(40)), 400, "malformed_form"),
    ("/generate", FORM, b"voice=af_heart", 422, "invalid_field"),
    ("/generate", FORM, b"text=One.&text=Two.", 422, "invalid_field"),
    ("/generate", FORM, b"text=Hello.&voice=nobody", 422, "unknown_voice"),
    ("/generate", FORM, b"text=+++", 422, "empty_text"),
]


@pytest.fixture
async def strict_client(make_client: MakeClient) -> Client:
    return await make_client(max_chars=100, max_title_chars=200, max_body_bytes=4000)


async def assert_refusal(resp: Any, status: int, code: str) -> dict[str, Any]:
    assert resp.status == status, await resp.text()
    assert resp.content_type == JSON
    body = await resp.json()
    assert set(body) == {"error", "message"}
    assert body["error"] == code
    assert isinstance(body["message"], str) and len(body["message"]) > 10
    return body  # type: ignore[no-any-return]


@pytest.mark.parametrize(("path", "ctype", "body", "status", "code"), BAD_REQUESTS)
@pytest.mark.rule("refusal-json-no-key")
async def test_bad_request_is_refused_with_json_and_leaves_no_key(
    strict_client: Client, redis: Redis, path: str, ctype: str | None, body: bytes, status: int, code: str
) -> None:
    headers = {"Content-Type": ctype} if ctype else {}
    resp = await strict_client.post(path, data=body, headers=headers, skip_auto_headers={"Content-Type"})
    await assert_refusal(resp, status, code)
    assert await key_names(redis) == set()
    metrics = await (await strict_client.get("/metrics")).text()
    assert f'streamtts_intake_submits_total{{reason="{code}",result="refused"}} 1.0' in metrics


async def test_chunked_body_over_the_limit_is_refused(strict_client: Client, redis: Redis) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"text": "'
        for _ in range(10):
            yield b"a" * 1000
        yield b'"}'

    resp = await strict_client.post("/api/casts", data=chunks(), headers={"Content-Type": JSON})
    await assert_refusal(resp, 413, "body_too_large")
    assert await key_names(redis) == set()


async def test_wrong_method_and_unknown_route_answer_json(client: Client) -> None:
    resp = await client.get("/api/casts")
    await assert_refusal(resp, 405, "method_not_allowed")
    assert "POST" in resp.headers["Allow"]
    await assert_refusal(await client.get("/api/nothing"), 404, "not_found")
    await assert_refusal(await client.get("/pub/casts/abc"), 404, "not_found")


async def test_submits_past_the_inflight_limit_are_shed_with_503(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(max_inflight=1, max_waiting=0)
    release = asyncio.Event()

    async def slow_body() -> AsyncIterator[bytes]:
        yield b'{"text": "Slow '
        await release.wait()
        yield b'upload."}'

    slow = asyncio.ensure_future(client.post("/api/casts", data=slow_body(), headers={"Content-Type": JSON}))
    for _ in range(100):  # until the slow request holds the only permit
        if client.app is not None and client.app[INTAKE].gate.active == 1:
            break
        await asyncio.sleep(0.01)
    shed = await client.post("/api/casts", json={"text": "Hello."})
    await assert_refusal(shed, 503, "busy")
    assert shed.headers["Retry-After"] == "1"
    release.set()
    assert (await slow).status == 201
    assert (await client.post("/api/casts", json={"text": "Hello."})).status == 201
    assert len({k for k in await keys_besides_rate_limits(redis) if not k.startswith("jobs/")}) == 4  # two casts (log + catalog)


async def test_a_burst_past_the_inflight_limit_waits_its_turn(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(max_inflight=2, max_waiting=100)
    replies = await asyncio.gather(*(client.post("/api/casts", json={"text": f"Cast {i}."}) for i in range(60)))
    assert [r.status for r in replies] == [201] * 60
    assert len(await read_jobs(redis)) == 60


@pytest.mark.rule("body-deadline")
async def test_a_trickled_body_is_cut_off_at_its_deadline_and_others_are_served(
    make_client: MakeClient, redis: Redis
) -> None:
    """Finding 3 of #21: nothing bounded the time to read a body; a trickle held its permit forever."""
    client = await make_client(body_timeout_s=0.5, max_inflight=1)

    async def trickle() -> AsyncIterator[bytes]:
        yield b'{"text": "'
        await asyncio.sleep(5)
        yield b'late."}'

    slow = asyncio.ensure_future(client.post("/api/casts", data=trickle(), headers={"Content-Type": "application/json"}))
    await asyncio.sleep(0.1)
    fast = await client.post("/api/casts", json={"text": "Served in time."})
    assert fast.status == 201  # the permit came free at the deadline
    resp = await asyncio.wait_for(slow, 10)
    assert (resp.status, (await resp.json())["error"]) == (408, "body_timeout")
    fast_id = (await fast.json())["id"]
    assert {k for k in await keys_besides_rate_limits(redis) if k.startswith("catalog/")} == {castlog.catalog_key(fast_id)}


@pytest.mark.rule("body-deadline")
async def test_a_client_over_its_rate_is_refused_before_its_body_is_read(make_client: MakeClient, redis: Redis) -> None:
    """Finding 3 of #21: the rate limit was checked only after the body was read (a replica that
    had not refused the client yet read a trickled body to the end first)."""
    first, second = await make_client(rate=0.01, burst=1), await make_client(rate=0.01, burst=1, body_timeout_s=30)
    assert (await first.post("/api/casts", json={"text": "The one token."})).status == 201

    async def trickle() -> AsyncIterator[bytes]:
        yield b'{"text": "'
        await asyncio.sleep(20)
        yield b'never."}'

    resp = await asyncio.wait_for(
        second.post("/api/casts", data=trickle(), headers={"Content-Type": "application/json"}), 5
    )
    assert (resp.status, (await resp.json())["error"]) == (429, "rate_limited") and "Retry-After" in resp.headers


@pytest.mark.rule("ack-replicated")
async def test_a_submit_no_replica_confirmed_is_503_and_its_retry_is_the_same_cast(make_client: MakeClient) -> None:
    client = await make_client(wait_replicas=1, wait_timeout_ms=20)  # this Redis has no replica
    resp = await client.post("/api/casts", json={"text": "Not confirmed in time."})
    body = await resp.json()
    assert (resp.status, body["error"]) == (503, "busy") and "Retry-After" in resp.headers
    plain = await make_client()
    again = await plain.post("/api/casts", json={"text": "Not confirmed in time."})
    assert again.status == 200  # the write stood: the retry finds the same cast
