"""A log that shrinks: Redis lost its last writes (the AOF cut back by a power loss, a failover
to a replica that lagged) and the cast was redone from there. Readers converge on what Redis
holds: the layout cache, the MP3 length, and the shared tail's listeners (moved back, they get
the replacing records, the new ``start`` included)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from castlog import CastStore, Eos, LogReader, Start, cast_key, playable, summarize
from castlog.keys import entry_id
from castlog.records import encode_fields
from edge.context import EDGE
from tests.edge.edge_helpers import Cast, audio_records, cast_id, read_events, write_cast, xrange_public
from tests.edge.test_edge_fanout import wait_for_listeners
from tests.support.waiting import wait_until

OLD_TS = 1_700_000_000_000  # stamps for records written by hand


async def cut_back(redis: Redis, cid: str, keep: int) -> None:
    """Redis lost every record from seq ``keep`` on (as when the AOF's last second is gone)."""
    key = cast_key(cid)
    kept = await redis.xrange(key, max=entry_id(keep - 1)) if keep > 0 else []
    async with redis.pipeline(transaction=True) as pipe:  # DEL and re-append, as an AOF replay would
        pipe.delete(key)
        for raw_id, fields in kept:
            pipe.xadd(key, fields, id=raw_id)
        await pipe.execute()


async def following(edge: TestClient[Any, Any], cid: str) -> asyncio.Task[list[Any]]:
    """An SSE reader of the cast, once the shared tail counts it as a listener: its events, at the end."""
    resp = await edge.get(f"/api/casts/{cid}/events")
    reader = asyncio.create_task(read_events(resp, timeout_s=20))
    await wait_for_listeners(edge, cid, 1)
    return reader


async def redo_from(store: CastStore, cid: str, seq: int, texts: list[str], *, start_i: int, finish: bool) -> Cast:
    """A second attempt at ``seq``: a new start, audio from sentence ``start_i``, maybe eos."""
    cast = Cast(store, cid, seq)
    await cast.append(Start(attempt=2, resume_from=start_i, at=1))
    await cast.append(*audio_records(texts, start_i=start_i, ms=400))
    if finish:
        await cast.append(Eos(sentences=start_i + len(texts), audio_ms=1, attempts=2))
    return cast


@pytest.mark.rule("views-checked-on-use")
async def test_a_finished_cast_rewritten_after_a_lost_tail_is_served_as_redis_holds_it(
    edge: TestClient[Any, Any], store: CastStore, redis: Redis,
) -> None:
    cid = cast_id()
    await write_cast(store, cid, ["One.", "Two.", "Three."])  # meta, start, audio 0-2, eos: 6
    before = await (await edge.get(f"/api/casts/{cid}")).json()
    assert before["tail"] == 6 and (await edge.get(f"/api/casts/{cid}/audio.mp3")).status == 200
    await cut_back(redis, cid, 3)  # audio 1, 2 and eos lost ...
    await redo_from(store, cid, 3, ["Two!", "Three!"], start_i=1, finish=True)  # ... redone: 3..6
    state = await (await edge.get(f"/api/casts/{cid}")).json()
    entries = await LogReader(store.redis).read(cid, 0, 100)
    assert state["tail"] == 7 == summarize(entries).tail
    assert state["attempts"] == 2
    resp = await edge.get(f"/api/casts/{cid}/audio.mp3")
    body = await resp.read()
    want = b"".join(e.record.body for e in playable(entries))  # type: ignore[union-attr]
    assert resp.status == 200 and resp.content_length == len(want) and body == want


@pytest.mark.rule("views-checked-on-use")
async def test_a_log_cut_back_to_fewer_records_is_not_served_from_the_cache(
    edge: TestClient[Any, Any], store: CastStore, redis: Redis,
) -> None:
    cid = cast_id(1)
    await write_cast(store, cid, ["One.", "Two.", "Three."])
    assert (await (await edge.get(f"/api/casts/{cid}")).json())["status"] == "done"
    await cut_back(redis, cid, 4)  # eos and the last audio lost: the cast is live again
    state = await (await edge.get(f"/api/casts/{cid}")).json()
    assert state["tail"] == 4 and state["status"] != "done"
    resp = await edge.get(f"/api/casts/{cid}/records")
    assert [r["seq_num"] for r in (await resp.json())["records"]] == [0, 1, 2, 3]


@pytest.mark.rule("follower-moved-back")
async def test_an_sse_follower_past_the_new_tail_is_moved_back_and_gets_the_new_start(
    edge: TestClient[Any, Any], store: CastStore, redis: Redis,
) -> None:
    cid = cast_id(2)
    cast = await write_cast(store, cid, ["One.", "Two.", "Three."], finish=False)  # tail 5
    reader = await following(edge, cid)
    await cast.append(*audio_records(["Four."], start_i=3))  # seq 5, delivered live
    await asyncio.sleep(0.2)
    await cut_back(redis, cid, 3)  # seq 3..5 lost; the follower has them
    await redo_from(store, cid, 3, ["Two!", "Three!", "Four!"], start_i=1, finish=True)  # 3..7
    events = await reader
    seqs = [int(e.id or -1) for e in events]
    stored = await xrange_public(redis, cid)
    # what it saw first, then from the last record that still stands: the replacing records
    rewound_at = next(k for k in range(1, len(seqs)) if seqs[k] <= seqs[k - 1])
    assert seqs[:rewound_at] == [0, 1, 2, 3, 4, 5]
    assert seqs[rewound_at:] == [3, 4, 5, 6, 7]
    assert [e.json() for e in events[rewound_at:]] == stored[3:]
    assert events[rewound_at].event == "start"


@pytest.mark.rule("follower-moved-back")
async def test_a_follower_waiting_past_a_shrunk_tail_is_not_left_waiting(
    make_edge: Any, store: CastStore, redis: Redis,
) -> None:
    edge = await make_edge(tail_block_ms=300)
    cid = cast_id(3)
    await write_cast(store, cid, ["One.", "Two.", "Three."], finish=False)  # tail 5
    reader = await following(edge, cid)
    await cut_back(redis, cid, 3)  # the follower waits after seq 4, which is gone
    await asyncio.sleep(0.5)  # an idle read: the tail checks its cursors
    await Cast(store, cid, 3).append(Eos(sentences=1, audio_ms=1, attempts=1))  # seq 3: the end
    events = await reader
    assert [int(e.id or -1) for e in events] == [0, 1, 2, 3, 4, 3]
    assert events[-1].event == "eos"


@pytest.mark.rule("views-checked-on-use", "follower-moved-back")
async def test_a_rewrite_whose_first_record_follows_the_cursor_is_still_caught_without_an_idle_read(
    make_edge: Any, store: CastStore, redis: Redis,
) -> None:
    edge = await make_edge(tail_block_ms=60_000)  # no idle read: only the rows' own check can catch it
    tail = edge.server.app[EDGE].tail
    cid = cast_id(4)
    cast = await write_cast(store, cid, ["One.", "Two.", "Three."], finish=False)  # tail 5
    reader = await following(edge, cid)
    await cast.append(*audio_records(["Four."], start_i=3))  # seq 5, delivered live
    await wait_until(lambda: tail.watches[cid].cursor == 5)
    await asyncio.sleep(0.01)  # Redis's clock moves on: the rewrite's stamps differ from seq 5's
    await cut_back(redis, cid, 5)  # seq 5 lost ...
    redo = Cast(store, cid, 5)  # ... and rewritten in one append: the XREAD after 0-5 gets seq 6
    await redo.append(Start(attempt=2, resume_from=3, at=1), *audio_records(["Four!"], start_i=3))
    await redo.append(Eos(sentences=4, audio_ms=1, attempts=2))
    events = await reader
    assert [int(e.id or -1) for e in events] == [0, 1, 2, 3, 4, 5, 5, 6, 7]
    assert [e.json() for e in events[6:]] == (await xrange_public(redis, cid))[5:]
    assert events[6].event == "start"


async def test_records_written_before_the_predecessor_stamp_are_still_followed(
    make_edge: Any, store: CastStore, redis: Redis,
) -> None:
    edge = await make_edge(tail_block_ms=60_000)
    cid = cast_id(5)
    await write_cast(store, cid, ["One.", "Two.", "Three."], finish=False)  # tail 5
    reader = await following(edge, cid)
    old = [*audio_records(["Four."], start_i=3), Eos(sentences=4, audio_ms=1, attempts=1)]
    for seq, record in enumerate(old, start=5):  # as an append before `p` wrote them: e, h, b, ts
        kind, headers, body = encode_fields(record)
        fields = {b"e": kind, b"h": headers, **({b"b": body} if body else {}), b"ts": str(OLD_TS + seq).encode()}
        await redis.xadd(cast_key(cid), fields, id=entry_id(seq))  # type: ignore[arg-type]
    events = await reader
    assert [int(e.id or -1) for e in events] == [0, 1, 2, 3, 4, 5, 6]
    assert [e.json() for e in events] == await xrange_public(redis, cid)
