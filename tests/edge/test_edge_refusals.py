"""Only pub/casts/<id> is readable, refusals are JSON, limits answer 429, no stack trace leaks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis
from yarl import URL

from castlog import CastStore
from edge.context import EDGE
from tests.edge.edge_helpers import calls_between, cast_id, command_calls, write_cast
from tests.support.waiting import wait_until

# Paths exactly as a client might send them (percent-encoding kept as is).
REFUSED_PATHS = [
    "/api/casts/jobs",
    "/api/casts/jobs%2Fdead",
    "/api/casts/..",
    "/api/casts/%2e%2e",
    "/api/casts/..%2F..%2Fjobs",
    "/api/casts/*",
    "/api/casts/%2A",
    "/api/casts/catalog%2FAAAAAAAAAAAA",
    "/api/casts/progress%2Fdone",
    "/api/casts/AAAAAAAAAAA",  # 11 characters
    "/api/casts/AAAAAAAAAAAAA",  # 13 characters
    "/api/casts/AAAAAA%20AAAAA",
    "/api/casts/AAAAAAAAAAA%2F",
    "/api/casts/AAAAAAAAAAA=",
    "/api/casts/jobs/records",
    "/api/casts/..%2Fjobs/records?seq_num=0",
    "/api/casts/catalog%2Fx/events",
    "/api/casts/%2A/audio.mp3",
    "/api/casts/" + "A" * 500 + "/records",
    "/s2/records?stream=jobs",
    "/s2/records?stream=jobs/dead",
    "/s2/records?stream=progress/done",
    "/s2/records?stream=synth/voices",
    "/s2/records?stream=catalog/AAAAAAAAAAAA",
    "/s2/records?stream=pub/casts/..",
    "/s2/records?stream=pub/casts/../jobs",
    "/s2/records?stream=pub/casts/*",
    "/s2/records?stream=pub%2Fcasts%2F*",
    "/s2/records?stream=pub/casts/AAAAAAAAAAAA/x",
    "/s2/records?stream=pub/casts/AAAAAAAAAAAAA",
    "/s2/records?stream=pub/casts/AAAAAA%20AAAAA",
    "/s2/records?stream=rl/edge/127.0.0.1",
    "/s2/records",
    "/c/jobs",
    "/c/..%2Fjobs",
    "/api/jobs",
    "/jobs",
]


@pytest.mark.rule("only-cast-logs-readable")
async def test_refused_names_are_404_json_without_any_redis_command(edge: TestClient[Any, Any], redis: Redis) -> None:
    await asyncio.sleep(0.05)  # start-up's own commands are done
    before = await command_calls(redis)
    for path in REFUSED_PATHS:
        resp = await edge.get(URL(path, encoded=True))
        assert resp.status == 404, path
        body = await resp.json()
        assert body["error"] == "not_found" and body["message"], path
    after = await command_calls(redis)
    assert calls_between(before, after) == {}


async def test_a_well_formed_id_without_a_log_is_404(edge: TestClient[Any, Any]) -> None:
    cid = cast_id("never submitted")
    for path in ("", "/records", "/events", "/audio.mp3"):
        resp = await edge.get(f"/api/casts/{cid}{path}")
        assert resp.status == 404, path
        assert (await resp.json())["error"] == "not_found"


# seq_num beyond a stream id's 64 bits (MAX_SEQ_NUM + 1 and more) is refused before Redis refuses it
@pytest.mark.parametrize("query", ["seq_num=-1", "seq_num=x", "seq_num=18446744073709551615", "seq_num=" + "9" * 30,
                                   "limit=0", "limit=1000", "wait=99", "wait=soon"])
@pytest.mark.rule("refusal-json-no-key")
async def test_malformed_parameters_are_400_json(edge: TestClient[Any, Any], store: CastStore, query: str) -> None:
    cid = cast_id()
    await write_cast(store, cid, ["One."])
    resp = await edge.get(f"/api/casts/{cid}/records?{query}")
    assert resp.status == 400
    body = await resp.json()
    assert body["error"] == "bad_request" and query.split("=")[0] in body["message"]


@pytest.mark.parametrize("last_id", ["abc", "\u00b2", "1" * 19, "-1"])  # "²" is a digit to str.isdigit()
async def test_malformed_last_event_id_is_400(edge: TestClient[Any, Any], store: CastStore, last_id: str) -> None:
    cid = cast_id()
    await write_cast(store, cid, ["One."], finish=False)
    resp = await edge.get(f"/api/casts/{cid}/events", headers={"Last-Event-ID": last_id})
    assert resp.status == 400 and (await resp.json())["error"] == "bad_request"


async def test_sse_from_a_seq_num_beyond_any_stream_id_is_400(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    await write_cast(store, cid, ["One."], finish=False)  # live: the stream would open, then fail in Redis
    resp = await edge.get(f"/api/casts/{cid}/events?seq_num=18446744073709551615")
    assert resp.status == 400 and "seq_num" in (await resp.json())["message"]


async def test_writes_are_refused_as_json(edge: TestClient[Any, Any]) -> None:
    resp = await edge.post(f"/api/casts/{cast_id()}/records", data=b"x")
    assert resp.status == 405
    assert (await resp.json())["error"] == "method_not_allowed"


async def test_an_unexpected_error_is_a_plain_json_500(edge: TestClient[Any, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    layouts = edge.server.app[EDGE].layouts

    async def broken(*args: Any) -> Any:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(layouts, "get", broken)
    resp = await edge.get(f"/api/casts/{cast_id()}")
    assert resp.status == 500
    text = await resp.text()
    assert "secret" not in text and "Traceback" not in text and "RuntimeError" not in text
    assert (await resp.json())["error"] == "internal"


@pytest.mark.rule("rate-limit-shared")
async def test_reads_over_the_budget_get_429_with_retry_after(make_edge: Any, store: CastStore) -> None:
    edge = await make_edge(read_rate=0.5, read_burst=3)
    cid = cast_id()
    await write_cast(store, cid, ["One."])
    statuses = [(await edge.get(f"/api/casts/{cid}/records")).status for _ in range(3)]
    assert statuses == [200, 200, 200]
    resp = await edge.get(f"/api/casts/{cid}/records")
    assert resp.status == 429
    assert int(resp.headers["Retry-After"]) >= 1
    assert (await resp.json())["error"] == "rate_limited"
    # another address (behind the trusted local proxy) has its own bucket
    other = await edge.get(f"/api/casts/{cid}/records", headers={"X-Forwarded-For": "203.0.113.9"})
    assert other.status == 200
    metrics = await (await edge.get("/metrics")).text()
    assert "streamtts_edge_rate_limited_total 1.0" in metrics


async def test_open_streams_per_address_are_capped_with_429(make_edge: Any, store: CastStore) -> None:
    edge = await make_edge(max_streams_per_client=2)
    cid = cast_id()
    await write_cast(store, cid, ["One."], finish=False)
    first = await edge.get(f"/api/casts/{cid}/events")
    second = await edge.get(f"/api/casts/{cid}/audio.mp3")
    assert (first.status, second.status) == (200, 200)
    third = await edge.get(f"/api/casts/{cid}/events")
    assert third.status == 429
    assert third.headers["Retry-After"] == "5"
    assert (await third.json())["error"] == "too_many_streams"
    elsewhere = await edge.get(f"/api/casts/{cid}/events", headers={"X-Forwarded-For": "198.51.100.7"})
    assert elsewhere.status == 200
    first.close()  # a seat comes free once the edge notices the stream ended
    elsewhere.close()
    seats = edge.server.app[EDGE].guard.seats

    async def a_seat_is_free() -> bool:  # given back in Redis, where every replica counts it
        return bool(await store.redis.zcard(seats.key("127.0.0.1")) < 2)

    await wait_until(a_seat_is_free, timeout_s=5)
    fourth = await edge.get(f"/api/casts/{cid}/events")
    assert fourth.status == 200
    fourth.close()
    second.close()


async def test_the_stream_cap_holds_across_edge_replicas(make_edge: Any, store: CastStore) -> None:
    """Two edges behind one proxy: a client's open streams count together."""
    replica_a = await make_edge(max_streams_per_client=2)
    replica_b = await make_edge(max_streams_per_client=2)
    cid = cast_id()
    await write_cast(store, cid, ["One."], finish=False)
    first = await replica_a.get(f"/api/casts/{cid}/events")
    second = await replica_b.get(f"/api/casts/{cid}/events")
    assert (first.status, second.status) == (200, 200)
    for replica in (replica_a, replica_b):
        refused = await replica.get(f"/api/casts/{cid}/audio.mp3")
        assert refused.status == 429 and (await refused.json())["error"] == "too_many_streams"
    first.close()
    second.close()
