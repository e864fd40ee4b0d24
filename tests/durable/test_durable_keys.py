"""Durable streams' keys by family: a stream's keys, a fork's and its source's share one hash slot
(every script runs in one slot of a Redis Cluster), a fork away from home is found through its
path's link from any process, a path is never both at home and linked, and streams written under
the names before families are migrated in place."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot

from durablestreams.keys import keys_of, link_key, migrate_durable_keys
from durablestreams.scripts import BACKSTOP_MS
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


async def test_a_deleted_forks_path_is_free_and_a_kept_link_is_read_again(redis: Redis) -> None:
    streams = DurableStreams(redis)
    await streams.create("src", Spec("text/plain"), [b"s"])
    meta = (await streams.open("src", touch=False)).meta
    assert meta is not None
    await streams.create("p", Spec("text/plain", source="src", fork_at=meta.tail), [])
    assert await streams.delete("p") == "deleted"
    assert await redis.exists(link_key("p")) == 0, "the link went with its stream"
    streams.links.keep("p", "src")  # as another process that read the link before would
    fresh = DurableStreams(redis)
    assert (await fresh.create("p", Spec("text/plain"), [b"again"])).status == "created"
    assert await redis.exists(keys_of("p")[0]) == 1, "at home: the path is its own again"
    assert await _text(streams, "p") == b"again", "the kept link led nowhere: it was read again"
    assert streams.links.family("p") == "p"
    assert await streams.delete("p") == "deleted"


@pytest.mark.rule("ds-fork", "ds-expiry")
async def test_a_forks_link_lives_as_long_as_its_stream(redis: Redis) -> None:
    streams = DurableStreams(redis)
    now_ms = (await redis.time())[0] * 1000
    await streams.create("root", Spec("text/plain"), [b"r"])
    root = (await streams.open("root", touch=False)).meta
    assert root is not None
    for name in ("kept", "deleted"):
        await streams.create(name, Spec("text/plain", source="root", fork_at=root.tail), [])
    kept = (await streams.open("kept", touch=False)).meta
    assert kept is not None
    await streams.create("leaf", Spec("text/plain", source="kept", fork_at=kept.tail), [])
    assert await redis.ttl(link_key("kept")) == -1, "forks read it: its link lives on"
    assert await streams.delete("leaf") == "deleted"
    assert await streams.delete("deleted") == "deleted"
    assert await redis.exists(link_key("leaf"), link_key("deleted")) == 0
    # lapsed, and met again: removed by the script, its link with it
    lapsed = Spec("text/plain", source="root", fork_at=root.tail, expires_at="x", deadline_ms=now_ms - 1)
    assert (await streams.create("lapsed", lapsed, [])).status == "created"
    assert await redis.ttl(link_key("lapsed")) > 0, "its link expires with its keys"
    assert (await DurableStreams(redis).open("lapsed", touch=False)).status == "missing"
    # lapsed long ago and never met again: Redis expires its keys and its link at once
    gone = Spec("text/plain", source="root", fork_at=root.tail, expires_at="x",
                deadline_ms=now_ms - BACKSTOP_MS - 60_000)
    assert (await streams.create("expired", gone, [])).status == "created"
    assert await redis.exists(link_key("expired"), *keys_of("expired", "root")) == 0
    assert await streams.delete("kept") == "deleted"
    for name in ("kept", "leaf", "deleted", "lapsed", "expired"):
        assert await redis.keys(f"ds/*{name}*") == [], name


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
