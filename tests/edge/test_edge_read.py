"""Replay: records, the gateway path, SSE and the cast's state all agree with XRANGE of the log."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from castlog import CastStore, Eos, Error, Queued, Start
from tests.edge.edge_helpers import Cast, audio_records, cast_id, read_events, write_cast, xrange_public

TEXTS = [f"Sentence number {i}." for i in range(7)]


@pytest.mark.rule("read-from-seq")
async def test_records_from_zero_equal_xrange_of_the_log(edge: TestClient[Any, Any], store: CastStore, redis: Redis) -> None:
    cid = cast_id()
    await write_cast(store, cid, TEXTS)
    expected = await xrange_public(redis, cid)
    resp = await edge.get(f"/api/casts/{cid}/records", params={"seq_num": "0"})
    assert resp.status == 200
    page = await resp.json()
    assert page["records"] == expected
    assert page["next_seq_num"] == page["tail"] == len(expected) == 10
    assert page["closed"] is True


async def test_records_in_pages_walk_the_whole_log(edge: TestClient[Any, Any], store: CastStore, redis: Redis) -> None:
    cid = cast_id()
    await write_cast(store, cid, TEXTS)
    got: list[dict[str, Any]] = []
    seq, closed = 0, False
    while not closed:
        page = await (await edge.get(f"/api/casts/{cid}/records", params={"seq_num": str(seq), "limit": "3"})).json()
        assert len(page["records"]) <= 3
        got += page["records"]
        seq, closed = page["next_seq_num"], page["closed"]
    assert got == await xrange_public(redis, cid)


async def test_gateway_path_gives_the_same_answer(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    await write_cast(store, cid, TEXTS)
    direct = await (await edge.get(f"/api/casts/{cid}/records?seq_num=4&limit=2")).json()
    resp = await edge.get("/s2/records", params={"stream": f"pub/casts/{cid}", "seq_num": "4", "limit": "2"})
    assert resp.status == 200
    assert await resp.json() == direct
    assert [r["seq_num"] for r in direct["records"]] == [4, 5]


async def test_sse_from_zero_equals_xrange_and_ends_after_eos(edge: TestClient[Any, Any], store: CastStore, redis: Redis) -> None:
    cid = cast_id()
    await write_cast(store, cid, TEXTS)
    resp = await edge.get(f"/api/casts/{cid}/events")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    assert resp.headers["Cache-Control"] == "no-cache"
    assert resp.headers["X-Accel-Buffering"] == "no"
    events = await read_events(resp)
    expected = await xrange_public(redis, cid)
    assert [e.json() for e in events] == expected
    assert [e.id for e in events] == [str(r["seq_num"]) for r in expected]
    assert [e.event for e in events] == [r["kind"] for r in expected]


@pytest.mark.rule("read-from-seq")
async def test_sse_resumes_after_last_event_id(edge: TestClient[Any, Any], store: CastStore, redis: Redis) -> None:
    cid = cast_id()
    await write_cast(store, cid, TEXTS)
    resp = await edge.get(f"/api/casts/{cid}/events", headers={"Last-Event-ID": "4"})
    events = await read_events(resp)
    assert [int(e.id or -1) for e in events] == list(range(5, 10))
    assert [e.json() for e in events] == (await xrange_public(redis, cid))[5:]


@pytest.mark.rule("read-from-seq")
async def test_sse_seq_num_parameter_starts_there(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    await write_cast(store, cid, TEXTS)
    events = await read_events(await edge.get(f"/api/casts/{cid}/events?seq_num=8"))
    assert [e.event for e in events] == ["audio", "eos"]


async def test_sse_past_the_end_of_a_finished_cast_is_204(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    await write_cast(store, cid, TEXTS)
    resp = await edge.get(f"/api/casts/{cid}/events", headers={"Last-Event-ID": "9"})
    assert resp.status == 204  # EventSource stops reconnecting on 204


@pytest.mark.rule("read-from-seq")
async def test_sse_follows_records_appended_while_listening(edge: TestClient[Any, Any], store: CastStore, redis: Redis) -> None:
    cid = cast_id()
    cast = await write_cast(store, cid, TEXTS[:2], finish=False)
    resp = await edge.get(f"/api/casts/{cid}/events")
    reader = asyncio.create_task(read_events(resp))
    more = audio_records(TEXTS[2:], start_i=2, body_bytes=100)
    for record in more:
        await asyncio.sleep(0.02)
        await cast.append(record)
    await cast.append(Eos(sentences=len(TEXTS), audio_ms=1, attempts=1))
    events = await reader
    assert [e.json() for e in events] == await xrange_public(redis, cid)


async def test_an_error_followed_by_a_retry_does_not_end_a_replay(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    cast = await write_cast(store, cid, TEXTS[:2], finish=False)
    await cast.append(Error(reason="worker lost", attempts=1))
    await cast.append(Start(attempt=2, resume_from=2, at=0))
    await cast.append(*audio_records(TEXTS[2:3], start_i=2, body_bytes=10))
    await cast.append(Eos(sentences=3, audio_ms=1, attempts=2))
    events = await read_events(await edge.get(f"/api/casts/{cid}/events"))
    assert [e.event for e in events] == ["meta", "start", "audio", "audio", "error", "start", "audio", "eos"]


async def test_sse_of_a_log_ending_in_error_ends_after_it(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    cast = await write_cast(store, cid, TEXTS[:1], finish=False)
    resp = await edge.get(f"/api/casts/{cid}/events")
    reader = asyncio.create_task(read_events(resp))
    await asyncio.sleep(0.05)
    await cast.append(Error(reason="model failed", attempts=3))
    events = await reader
    assert events[-1].event == "error"
    assert events[-1].json()["headers"] == {"reason": "model failed", "attempts": 3}


async def test_sse_sends_heartbeat_comments_while_idle(make_edge: Any, store: CastStore) -> None:
    """Idle, the stream carries only comments (no event a client would act on), and it stays
    live: the record appended after them still comes, and ends the stream."""
    edge = await make_edge(sse_heartbeat_s=0.1)
    cid = cast_id()
    cast = await write_cast(store, cid, TEXTS[:1], finish=False)  # seqs 0-2: meta, start, audio
    resp = await edge.get(f"/api/casts/{cid}/events?seq_num=3")
    assert resp.status == 200 and resp.content_type == "text/event-stream"
    blocks = [await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5) for _ in range(3)]
    assert blocks[0].startswith(b"retry: ") and blocks[1:] == [b": heartbeat\n\n"] * 2
    await cast.append(Eos(sentences=1, audio_ms=300, attempts=1))
    events = await read_events(resp)
    assert [(e.id, e.event) for e in events] == [("3", "eos")]


async def test_long_poll_waits_for_the_next_record(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    cast = await write_cast(store, cid, TEXTS[:2], finish=False)
    poll = asyncio.create_task(edge.get(f"/api/casts/{cid}/records", params={"seq_num": "4", "wait": "10"}))
    await asyncio.sleep(0.1)
    assert not poll.done()
    await cast.append(*audio_records(TEXTS[2:3], start_i=2, body_bytes=10))
    page = await (await asyncio.wait_for(poll, 5)).json()
    assert [r["seq_num"] for r in page["records"]] == [4]
    assert page["next_seq_num"] == 5 and page["closed"] is False


async def test_long_poll_times_out_empty(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    await write_cast(store, cid, TEXTS[:1], finish=False)
    page = await (await edge.get(f"/api/casts/{cid}/records?seq_num=3&wait=0.2")).json()
    assert page == {"records": [], "next_seq_num": 3, "tail": 3, "closed": False}


async def test_cast_state_follows_the_log(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    cast = Cast(store, cid)
    await cast.submit(3, title="state test")
    state = await (await edge.get(f"/api/casts/{cid}")).json()
    assert (state["status"], state["planned"], state["finished"], state["tail"]) == ("queued", 3, 0, 1)
    await cast.append(Start(attempt=1, resume_from=0, at=0), *audio_records(TEXTS[:2], body_bytes=5, ms=250))
    state = await (await edge.get(f"/api/casts/{cid}")).json()
    assert (state["status"], state["finished"], state["audio_ms"], state["attempts"]) == ("generating", 2, 500, 1)
    await cast.append(Eos(sentences=3, audio_ms=500, attempts=1))
    state = await (await edge.get(f"/api/casts/{cid}")).json()
    assert state["status"] == "done" and state["title"] == "state test" and state["tail"] == 5
    assert state["links"]["audio"] == f"/api/casts/{cid}/audio.mp3"


async def test_head_of_a_live_stream_answers_at_once(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    await write_cast(store, cid, TEXTS[:1], finish=False)
    for path in ("events", "audio.mp3"):
        resp = await asyncio.wait_for(edge.head(f"/api/casts/{cid}/{path}"), 5)
        assert resp.status == 200, path


@pytest.mark.rule("queue-noted")
async def test_a_queued_casts_place_and_estimate_are_in_its_state_and_its_events(
    edge: TestClient[Any, Any], store: CastStore
) -> None:
    cid = cast_id()
    cast = Cast(store, cid)
    await cast.submit(len(TEXTS))
    await cast.append(Queued(pos=3, eta_ms=41_000))
    state = await (await edge.get(f"/api/casts/{cid}")).json()
    assert (state["status"], state["queue_position"], state["starts_in_ms"]) == ("queued", 3, 41_000)
    assert state["queue_at"] > 0
    await cast.append(Queued(pos=1))  # the place moved; no worker has measured its speed
    state = await (await edge.get(f"/api/casts/{cid}")).json()
    assert (state["queue_position"], state["starts_in_ms"]) == (1, None)
    resp = await edge.get(f"/api/casts/{cid}/events")
    reader = asyncio.create_task(read_events(resp))
    await cast.append(Start(attempt=1, resume_from=0, at=0), *audio_records(TEXTS[:1], body_bytes=10))
    await cast.append(Eos(sentences=1, audio_ms=1, attempts=1))
    events = await reader
    assert [e.event for e in events] == ["meta", "queue", "queue", "start", "audio", "eos"]
    assert [e.json()["headers"] for e in events[1:3]] == [{"pos": 3, "eta_ms": 41_000}, {"pos": 1}]
    state = await (await edge.get(f"/api/casts/{cid}")).json()
    assert (state["status"], state["queue_position"], state["starts_in_ms"]) == ("done", None, None)
