"""Durable streams' keys by family: a stream's keys, a fork's and its source's share one hash slot
(every script runs in one slot of a Redis Cluster), a fork away from home is found through its
path's link from any process, a path is never both at home and linked, and streams written under
the names before families are migrated in place."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot

from durablestreams.keys import keys_of, link_key, migrate_durable_keys
from durablestreams.streams import DurableStreams, Spec

pytestmark = pytest.mark.rule("ds-families")


async def _slots(redis: Redis) -> set[int]:
    return {key_slot(k) for k in await redis.keys("ds/*") if not k.endswith(b"/family")}


async def _text(streams: DurableStreams, path: str) -> bytes:
    found = await streams.open(path, touch=False)
    assert found.meta is not None, (path, found.status)
    got = await streams.read(found.meta, "0-0", 1 << 20)
    return b"".join(data for _, data in got.entries)


async def test_a_fork_chain_lives_in_one_slot_and_is_found_from_a_fresh_process(redis: Redis) -> None:
    writer = DurableStreams(redis)
    assert (await writer.create("root", Spec("text/plain"), [b"a"])).status == "created"
    tail = (await writer.open("root", touch=False)).meta
    assert tail is not None
    assert (await writer.create("one", Spec("text/plain", source="root", fork_at=tail.tail), [])).status == "created"
    assert (await writer.append("one", "text/plain", [b"b"])).status == "ok"
    one = (await writer.open("one", touch=False)).meta
    assert one is not None and one.family == "root"
    assert (await writer.create("two", Spec("text/plain", source="one", fork_at=one.tail), [])).status == "created"
    assert (await writer.append("two", "text/plain", [b"c"])).status == "ok"
    assert len(await _slots(redis)) == 1, "a chain's keys share one slot"
    assert await redis.get(link_key("two")) == b"root"
    reader = DurableStreams(redis)  # another process: no link kept yet
    assert await _text(reader, "two") == b"abc"
    assert (await reader.open("two", touch=False)).meta.family == "root"  # type: ignore[union-attr]


async def test_a_path_once_linked_keeps_its_family_for_a_plain_stream_too(redis: Redis) -> None:
    streams = DurableStreams(redis)
    await streams.create("src", Spec("text/plain"), [b"s"])
    meta = (await streams.open("src", touch=False)).meta
    assert meta is not None
    await streams.create("p", Spec("text/plain", source="src", fork_at=meta.tail), [])
    assert await streams.delete("p") == "deleted"
    fresh = DurableStreams(redis)
    assert (await fresh.create("p", Spec("text/plain"), [b"again"])).status == "created"
    assert await _text(DurableStreams(redis), "p") == b"again"
    assert await redis.exists(*keys_of("p")) == 0, "nothing at home: the path is linked"
    assert (await fresh.open("p", touch=False)).meta.family == "src"  # type: ignore[union-attr]


async def test_a_fork_cannot_take_a_path_that_has_a_stream_at_home(redis: Redis) -> None:
    streams = DurableStreams(redis)
    await streams.create("src", Spec("text/plain"), [b"s"])
    await streams.create("p", Spec("text/plain"), [b"home"])
    meta = (await streams.open("src", touch=False)).meta
    assert meta is not None
    outcome = await streams.create("p", Spec("text/plain", source="src", fork_at=meta.tail), [])
    assert outcome.status == "exists" and outcome.meta is not None and outcome.meta.source is None
    assert await redis.exists(link_key("p")) == 0


@pytest.mark.rule("ds-bounded")
async def test_a_refused_fork_leaves_no_link(redis: Redis) -> None:
    streams = DurableStreams(redis, max_stream_bytes=4)
    await streams.create("src", Spec("text/plain"), [b"s"])
    meta = (await streams.open("src", touch=False)).meta
    assert meta is not None
    assert (await streams.create("big", Spec("text/plain", source="src", fork_at=meta.tail), [b"12345"])).status \
        == "too_big"
    assert (await streams.create("orphan", Spec("text/plain", source="nobody", fork_at="0-0"), [])).status == "nosrc"
    assert await redis.exists(link_key("big"), link_key("orphan")) == 0


async def _old_stream(redis: Redis, path: str, data: list[bytes], source: str | None = None, fork_at: str = "") -> None:
    """A stream as the code before families wrote it: ds/meta/<path>, ds/log/<path>."""
    top = fork_at or "0-0"
    for n, item in enumerate(data, start=1):
        top = f"{1000 + n}-0" if not fork_at else f"{int(fork_at.split('-')[0]) + n}-0"
        await redis.xadd(f"ds/log/{path}", {"d": item}, id=top)
    meta = {"ct": "text/plain", "ctn": "text/plain", "top": top, "tail": top, "size": str(sum(map(len, data))),
            "refs": "0", "created": "1"}
    if source:
        meta.update({"src": source, "fofs": fork_at, "depth": "1"})
        await redis.hincrby(f"ds/meta/{source}", "refs", 1)
    await redis.hset(f"ds/meta/{path}", mapping=meta)
    await redis.hset(f"ds/prod/{path}", "p1", "0:0")


async def test_streams_under_the_old_names_are_migrated_and_read_as_before(redis: Redis) -> None:
    await _old_stream(redis, "old", [b"a", b"b"])
    await _old_stream(redis, "old/fork", [b"c"], source="old", fork_at="1002-0")
    await redis.pexpire("ds/log/old", 10**9)
    assert await migrate_durable_keys(redis) == 2
    assert not await redis.keys("ds/meta/*") and not await redis.keys("ds/log/*")
    streams = DurableStreams(redis)
    assert await _text(streams, "old") == b"ab"
    assert await _text(streams, "old/fork") == b"abc"
    assert await redis.pttl(keys_of("old")[1]) > 0, "a key's expiry moves with it"
    assert await redis.hget(keys_of("old/fork", "old")[2], "p1") == b"0:0"
    assert len(await _slots(redis)) == 1
    assert await migrate_durable_keys(redis) == 0, "a second run finds nothing"
    assert (await streams.append("old/fork", "text/plain", [b"d"])).status == "ok"
    assert await _text(DurableStreams(redis), "old/fork") == b"abcd"
