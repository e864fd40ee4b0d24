"""A state dir keeps the Redis server that wrote it: the embedded Valkey 9 writes files that
Debian's Redis 7.0 cannot read, so a later start must not take whatever is on PATH now."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from castlog import Audio, CastStore, Eos, Meta, Start, content_id
from servicekit import client_for
from streamtts.redisserver import start_server
from streamtts.serverchoice import RECORD, Server, ServerRefused, choose, record, recorded
from streamtts.statemove import copy_key
from tests.support.pathshadow import path_without

REDIS_ON_PATH = "/usr/bin/redis-server"

@pytest.fixture
def no_redis_path(tmp_path: Path) -> Iterator[str]:
    yield path_without(os.environ["PATH"], {"redis-server"}, tmp_path / "shadow")


def write_casts(url: str, n: int = 3) -> None:
    """Casts as synth leaves them: the submit script's keys, a log with MP3 bodies, a consumer
    group with a pending job."""
    import asyncio

    async def go() -> None:
        redis = client_for(url)
        store = CastStore(redis)
        for k in range(n):
            text = f"Cast number {k}."
            cast = content_id(text, "af_heart")
            meta = Meta(title=text, voice="af_heart", chars=len(text), sentences=1, created_at=k)
            assert await store.submit(cast, text, "af_heart", meta) == "new"
            body = hashlib.sha256(text.encode()).digest() * 900  # ~29 KB, like an MP3 chunk
            await store.append(cast, 1, [Start(attempt=1, resume_from=0, at=k)])
            await store.append(cast, 2, [Audio(i=0, t=text, d=1000, o=0, body=body)])
            if k:  # the first one stays unfinished, its job pending
                await store.append(cast, 3, [Eos(sentences=1, audio_ms=1000, attempts=1)])
        await redis.aclose()

    asyncio.run(go())
    with Redis.from_url(url) as r:
        r.xgroup_create("jobs", "synth-test", id="0", mkstream=True)
        r.xreadgroup("synth-test", "worker-1", {"jobs": ">"}, count=1)
        r.set("rl/test", "1", ex=3600)


def snapshot(url: str) -> dict[bytes, object]:
    """Every key's type and full contents, stream ids, groups and pending entries included."""
    out: dict[bytes, object] = {}
    with Redis.from_url(url) as r:
        for key in sorted(r.scan_iter(count=500)):
            kind = r.type(key)
            if kind == b"stream":
                info = r.xinfo_stream(key)
                groups = [(g["name"], g["last-delivered-id"], r.xpending_range(key, g["name"], "-", "+", 1000))
                          for g in r.xinfo_groups(key)]
                for _, _, pending in groups:
                    for item in pending:
                        item.pop("time_since_delivered")  # the clock moved on
                out[key] = (kind, r.xrange(key), info["last-generated-id"], info["entries-added"], groups)
            elif kind == b"hash":
                out[key] = (kind, r.hgetall(key))
            elif kind == b"string":
                out[key] = (kind, r.get(key), r.pttl(key) > 0)
            else:
                out[key] = (kind, r.dump(key))
    return out


def served_snapshot(data: Path) -> dict[bytes, object]:
    server = recorded(data)
    assert server is not None
    running = start_server(data, aof=True, binary=server.binary)
    try:
        return snapshot(running.url)
    finally:
        running.stop()


def files_digest(data: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted((data / "appendonlydir").iterdir()):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def run_up(state: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``up`` that is expected to refuse before anything starts (it returns at once)."""
    return subprocess.run([sys.executable, "-m", "streamtts", "up", "--port", "0", "--state-dir", str(state),
                           "--no-voice-install", "--only", "intake", *args],
                          env=env, capture_output=True, text=True, timeout=60, check=False)


def embedded_state(tmp_path: Path, path: str) -> tuple[Path, dict[bytes, object]]:
    """A state dir that the embedded Valkey wrote, as on a machine without redis-server."""
    old = os.environ["PATH"]
    os.environ["PATH"] = path
    try:
        data = tmp_path / "state" / "redis"
        server = choose(data, None)
        assert server.kind == "embedded" and server.name == "Valkey"
        running = start_server(data, aof=True, binary=server.binary)
        try:
            write_casts(running.url)
            return data, snapshot(running.url)
        finally:
            running.stop()
    finally:
        os.environ["PATH"] = old


def redis_state(tmp_path: Path) -> tuple[Path, Server, dict[bytes, object]]:
    """A state dir that Debian's Redis 7.0 wrote, with casts in it."""
    data = tmp_path / "state" / "redis"
    server = choose(data, "redis-server")
    running = start_server(data, aof=True, binary=server.binary)
    try:
        write_casts(running.url)
        return data, server, snapshot(running.url)
    finally:
        running.stop()


def test_a_state_dir_keeps_the_server_that_wrote_it_when_redis_appears_on_path(
        tmp_path: Path, no_redis_path: str) -> None:
    data, before = embedded_state(tmp_path, no_redis_path)
    assert Path(REDIS_ON_PATH).exists()  # now on PATH, as after scripts/test's apt-get
    server = choose(data, None)
    assert server.kind == "embedded"
    assert served_snapshot(data) == before


def test_a_new_state_dir_takes_redis_from_path_and_records_it(tmp_path: Path) -> None:
    data = tmp_path / "state" / "redis"
    server = choose(data, None)
    assert (server.kind, server.name) == ("path", "Redis")
    assert recorded(data) == server and (data / RECORD).is_file()


def test_a_switch_to_an_older_server_is_refused_before_anything_starts(tmp_path: Path, no_redis_path: str) -> None:
    data, _ = embedded_state(tmp_path, no_redis_path)
    digest = files_digest(data)
    done = run_up(tmp_path / "state", dict(os.environ), "--redis-server", REDIS_ON_PATH)
    assert done.returncode == 1, done.stderr
    said = done.stderr
    assert "Valkey 9" in said and "Redis 7.0" in said, said  # who wrote it, and who cannot read it
    assert "streamtts state move --to" in said and "keep the server that wrote it" in said
    assert "--fix <" not in said and "make a backup" not in said  # no advice meant for a corrupt file
    assert "Traceback" not in said
    assert files_digest(data) == digest
    assert recorded(data) is not None and recorded(data).kind == "embedded"  # type: ignore[union-attr]
    assert not list(tmp_path.glob("state/redis.*"))  # nothing else made


def test_older_to_newer_moves_by_a_switch_and_keeps_every_cast_byte_identical(tmp_path: Path) -> None:
    data, _, before = redis_state(tmp_path)
    server = choose(data, "embedded")  # Valkey 9 reads Redis 7.0's files: checked on a copy, then recorded
    assert server.name == "Valkey" and recorded(data) == server
    assert served_snapshot(data) == before


def test_state_move_takes_newer_data_to_an_older_server_key_by_key(tmp_path: Path, no_redis_path: str) -> None:
    data, before = embedded_state(tmp_path, no_redis_path)
    with pytest.raises(ServerRefused):
        choose(data, REDIS_ON_PATH)
    done = subprocess.run([sys.executable, "-m", "streamtts", "state", "move", "--to", REDIS_ON_PATH,
                           "--state-dir", str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "moved" in done.stderr and "keys" in done.stderr  # progress on stderr
    after = recorded(data)
    assert after is not None and after.name == "Redis"
    assert served_snapshot(data) == before
    kept = list(tmp_path.glob("state/redis.before-move-*"))
    assert len(kept) == 1 and (kept[0] / "appendonlydir").is_dir()  # the old files, never deleted
    shown = subprocess.run([sys.executable, "-m", "streamtts", "state", "show", "--state-dir", str(tmp_path / "state")],
                           capture_output=True, text=True, timeout=60, check=True)
    assert "Redis 7.0" in shown.stdout


def test_a_state_dir_from_before_the_record_is_adopted_by_the_server_that_reads_it(
        tmp_path: Path, no_redis_path: str) -> None:
    data, before = embedded_state(tmp_path, no_redis_path)
    (data / RECORD).unlink()
    server = choose(data, None)  # redis-server on PATH comes first, cannot read it: the embedded one can
    assert server.kind == "embedded"
    assert served_snapshot(data) == before


def test_a_second_up_on_the_same_state_dir_is_refused(tmp_path: Path) -> None:
    from streamtts.serverchoice import lock_state_dir

    fd = lock_state_dir(tmp_path / "state")
    try:
        done = run_up(tmp_path / "state", dict(os.environ))
        assert done.returncode == 1
        assert "in use by streamtts (pid" in done.stderr, done.stderr
    finally:
        os.close(fd)


def test_a_server_replaced_in_place_by_an_older_one_is_refused_with_what_to_do(
        tmp_path: Path, no_redis_path: str) -> None:
    data, _ = embedded_state(tmp_path, no_redis_path)
    was = recorded(data)
    assert was is not None
    # the record names a binary at a path that now holds Redis 7.0 (a distribution's downgrade)
    fake = tmp_path / "bin" / "redis-server"
    fake.parent.mkdir()
    fake.symlink_to(REDIS_ON_PATH)
    record(data, Server("path", str(fake), was.name, was.version))
    with pytest.raises(ServerRefused, match="Reinstall Valkey 9") as refused:
        choose(data, None)
    assert "--fix <" not in str(refused.value)
    assert recorded(data) == Server("path", str(fake), was.name, was.version)  # unchanged


def test_a_server_upgraded_in_place_reads_the_data_and_is_recorded(tmp_path: Path) -> None:
    data, server, before = redis_state(tmp_path)
    from streamtts.redisserver import embedded_binary

    newer = tmp_path / "bin" / "redis-server"  # the same path, a newer server behind it
    newer.parent.mkdir()
    newer.symlink_to(str(embedded_binary()))
    record(data, Server("path", str(newer), server.name, server.version))
    now = choose(data, None)
    assert (now.binary, now.name) == (str(newer), "Valkey") and recorded(data) == now
    assert served_snapshot(data) == before


@pytest.mark.rule("content-id-keyed")
def test_up_makes_the_content_key_once_per_state_dir(tmp_path: Path) -> None:
    from streamtts.launcher import CONTENT_KEY_FILE, content_key

    first = content_key(tmp_path / "state")
    assert len(first) >= 32 and content_key(tmp_path / "state") == first
    assert (tmp_path / "state" / CONTENT_KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert content_key(tmp_path / "other") != first


@pytest.mark.parametrize("garbage", [b"", b"{not json", b"[1, 2]", b"null", b'{"kind": "path"}', b"\xff\xfe"])
def test_a_garbage_server_record_is_refused_with_what_to_do(tmp_path: Path, garbage: bytes) -> None:
    data = tmp_path / "redis"
    data.mkdir()
    (data / RECORD).write_bytes(garbage)
    with pytest.raises(ServerRefused, match=r"cannot be read .*--redis-server"):
        recorded(data)
    with pytest.raises(ServerRefused, match=r"cannot be read"):
        choose(data, None)


def test_state_show_refuses_a_garbage_record_with_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "state" / "redis").mkdir(parents=True)
    (tmp_path / "state" / "redis" / RECORD).write_text("{not json")
    shown = subprocess.run([sys.executable, "-m", "streamtts", "state", "show", "--state-dir", str(tmp_path / "state")],
                           capture_output=True, text=True, timeout=60, check=False)
    assert shown.returncode == 2 and "cannot be read" in shown.stderr and "Traceback" not in shown.stderr


def test_a_key_that_expires_during_a_move_is_skipped_and_a_ttl_is_never_lost(redis_url: str) -> None:
    with Redis.from_url(redis_url) as src, Redis.from_url(redis_url, db=1) as dst:
        src.flushall()
        src.set(b"gone", b"x", px=1)
        src.set(b"soon", b"y", px=60_000)
        src.hset(b"h", mapping={b"a": b"1"})
        time.sleep(0.05)
        assert copy_key(src, dst, b"gone") is False and not dst.exists(b"gone")  # expired since the scan
        assert copy_key(src, dst, b"soon") and copy_key(src, dst, b"h")
        assert dst.get(b"soon") == b"y" and 0 < dst.pttl(b"soon") <= 60_000
        assert dst.hgetall(b"h") == {b"a": b"1"} and dst.pttl(b"h") == -1
        src.flushall()
