"""A log archived while the shared tail was behind on it: its listeners miss nothing."""

from __future__ import annotations

import json
from typing import Any

from redis.asyncio import Redis

from blobstore import BlobStore
from castlog import CastStore, Eos, LogReader, Start, cast_key
from edge.metrics import EdgeMetrics
from fanout.listener import Listener
from fanout.tail import Tail, after_id
from tests.edge.edge_helpers import Cast, audio_records, cast_id, xrange_public

from .archive_helpers import archiver


async def test_listener_behind_an_archived_log_reads_the_rest_from_the_archive(
    store: CastStore, redis: Redis, blob_store: BlobStore
) -> None:
    tail = Tail(redis, redis, EdgeMetrics().tail, block_ms=100, batch=100, queue_size=16,
                reader=LogReader(redis, blob_store), wake="test")
    cast = Cast(store, cast_id("behind"))
    await cast.submit(3)
    await cast.append(Start(attempt=1, resume_from=0, at=0), *audio_records(["a"], body_bytes=50))  # seqs 0-2
    expected = await xrange_public(redis, cast.id)
    listener = Listener(tail, cast.id, 0)
    got = [await listener.next(0) for _ in range(3)]
    assert await listener.next(0) is None and listener.subscribed  # caught up: it joined the tail at 2
    await cast.append(*audio_records(["b", "c"], start_i=1, body_bytes=60), Eos(sentences=3, audio_ms=900, attempts=1))
    expected = await xrange_public(redis, cast.id)
    assert await archiver(redis, blob_store).archive_cast(cast.id) == "archived"
    # the tail's next read, after its cursor 2, finds only the archived eos (seq 5)
    rows: Any = await redis.xrange(cast_key(cast.id), min=f"({after_id(tail.watches[cast.id].cursor)}")
    assert [r[0] for r in rows] == [b"0-6"]
    tail._fan_out([(cast.id, rows)], dict(tail.watches))
    assert not listener.subscribed and cast.id not in tail.watches  # back to offset reads
    while (item := await listener.next(0)) is not None:
        got.append(item)
    assert [json_of(i) for i in got] == expected and listener.finished


def json_of(item: Any) -> Any:
    return json.loads(item.json())
