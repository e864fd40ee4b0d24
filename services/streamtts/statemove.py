"""``streamtts state move``: a state dir's data moved to another server, key by key.

A server cannot load the files of a newer one (Redis 7.0 refuses Valkey 9's), and replication or
DUMP/RESTORE carry the same versioned format. A logical copy does not: both servers run side by
side, every key is read with the ordinary commands of its type and written again on the other one,
streams with their entry ids, last id, consumer groups and pending entries, keys with their TTLs.
The old files are kept beside the new ones (``redis.before-move-<time>``), never deleted.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from redis import Redis

from castlog.keys import decoded

from .client import say
from .redisserver import start_server
from .serverchoice import Server, choose, lock_state_dir, named, record, recorded, redis_password

SCAN_COUNT = 500
XRANGE_COUNT = 500
PENDING_COUNT = 1000
PROGRESS_EVERY = 1000  # keys between two progress lines

# redis-py's stubs type every reply as the union of all reply shapes; the copy knows each shape.
Conn = Any


def move(data_dir: Path, target: str) -> Path:
    """Move the data in ``data_dir`` to the server ``target`` names; return where the old files are."""
    lock = lock_state_dir(data_dir.parent)
    try:
        return _move(data_dir, target)
    finally:
        os.close(lock)


def _move(data_dir: Path, target: str) -> Path:
    source = recorded(data_dir) or choose(data_dir, None)
    wanted = named(target)
    if wanted == source:
        raise ValueError(f"the data in {data_dir} is already served by {source.describe()}: nothing to move")
    moving = data_dir.with_name(data_dir.name + ".moving")
    if moving.exists():
        raise ValueError(f"{moving} is left from a move that did not finish: remove it, then move again")
    say(f"moving {data_dir} from {source.describe()} to {wanted.describe()}")
    try:
        copied = _copy_into(data_dir, source, moving, wanted)
    except BaseException:
        shutil.rmtree(moving, ignore_errors=True)  # the state dir itself was only read
        raise
    # The copy is complete and names its server before the swap: the state dir never holds the new
    # files under the old server's record, whatever stops the swap half-way.
    (moving / "redis.log").unlink(missing_ok=True)
    record(moving, wanted)
    kept = data_dir.with_name(f"{data_dir.name}.before-move-{time.strftime('%Y%m%d-%H%M%S')}")
    data_dir.rename(kept)
    try:
        moving.rename(data_dir)
    except OSError as exc:
        raise RuntimeError(f"the copy is complete in {moving} and the old files are in {kept}, but {moving} "
                           f"could not be renamed to {data_dir} ({exc}): rename it by hand") from exc
    say(f"moved {copied} keys; {data_dir} is now served by {wanted.describe()}; the old files are in {kept}")
    return kept


def _copy_into(data_dir: Path, source: Server, moving: Path, wanted: Server) -> int:
    password = redis_password(data_dir.parent)  # both, as the state dir's server is: only this copy reads them
    old = start_server(data_dir, aof=True, binary=source.binary, password=password)
    try:
        new = start_server(moving, aof=True, binary=wanted.binary, password=password)
        try:
            with Redis.from_url(old.url) as src, Redis.from_url(new.url) as dst:
                copied = copy_all(src, dst)
                dst.execute_command("BGREWRITEAOF")  # one compact base file for the new server
                _wait_rewrite(dst)
        finally:
            new.stop()
    finally:
        old.stop()
    return copied


def copy_all(src: Conn, dst: Conn) -> int:
    """Copy every key of every database of ``src`` into ``dst``; the number of keys copied."""
    copied = 0
    for db in _databases(src):
        src.execute_command("SELECT", db)
        dst.execute_command("SELECT", db)
        for key in src.scan_iter(count=SCAN_COUNT):
            if not copy_key(src, dst, key):
                continue
            copied += 1
            if copied % PROGRESS_EVERY == 0:
                say(f"{copied} keys copied")
        if dst.dbsize() != src.dbsize():
            raise RuntimeError(f"database {db}: {src.dbsize()} keys there, {dst.dbsize()} copied: nothing was "
                               "changed in the state dir; run the move again")
    return copied


def _databases(src: Conn) -> list[int]:
    keyspace: dict[str, Any] = src.info("keyspace")
    return sorted(int(name[2:]) for name in keyspace if name.startswith("db"))


def copy_key(src: Conn, dst: Conn, key: bytes) -> bool:
    """Copy one key with its TTL; False when it expired since the scan (nothing copied)."""
    # The TTL is read first: a key expiring during its copy keeps a TTL on the new server, never
    # turns into one that lives for ever.
    ttl_ms = src.pttl(key)
    kind = decoded(src.type(key))
    if ttl_ms == -2 or kind == "none":
        return False
    if kind == "stream":
        copy_stream(src, dst, key)
    elif kind in READS:
        value = READS[kind](src, key)
        if not value:  # expired between the type and the read
            return False
        WRITES[kind](dst, key, value)
    else:
        raise RuntimeError(f"key {key!r} is of type {kind}, which a logical move cannot copy")
    if ttl_ms > 0:
        dst.pexpire(key, ttl_ms)
    return True


# How a key of each plain type is read whole, and written again.
READS: dict[str, Callable[[Conn, bytes], Any]] = {
    "string": lambda r, k: r.get(k),
    "hash": lambda r, k: r.hgetall(k),
    "list": lambda r, k: r.lrange(k, 0, -1),
    "set": lambda r, k: r.smembers(k),
    "zset": lambda r, k: dict(r.zrange(k, 0, -1, withscores=True)),
}
WRITES: dict[str, Callable[[Conn, bytes, Any], Any]] = {
    "string": lambda r, k, v: r.set(k, v),
    "hash": lambda r, k, v: r.hset(k, mapping=v),
    "list": lambda r, k, v: r.rpush(k, *v),
    "set": lambda r, k, v: r.sadd(k, *v),
    "zset": lambda r, k, v: r.zadd(k, v),
}


def copy_stream(src: Conn, dst: Conn, key: bytes) -> None:
    """Entries with their ids, the stream's last id and counters, its groups and their pending
    entries (each owned by the same consumer; idle times and delivery counts as they were)."""
    info = src.xinfo_stream(key)
    start = "-"
    any_entry = False
    while True:
        page = src.xrange(key, min=start, max="+", count=XRANGE_COUNT)
        for entry_id, fields in page:
            dst.xadd(key, fields, id=entry_id)
            any_entry = True
        if len(page) < XRANGE_COUNT:
            break
        start = "(" + decoded(page[-1][0])
    last_id = decoded(info["last-generated-id"])
    if not any_entry:  # an empty stream exists only once something made it: add one entry, delete it
        dst.xadd(key, {"_": ""}, id=last_id if last_id != "0-0" else "0-1")
        dst.xtrim(key, maxlen=0)
    dst.execute_command("XSETID", key, last_id, "ENTRIESADDED", info["entries-added"],
                        "MAXDELETEDID", decoded(info["max-deleted-entry-id"]))
    for group in src.xinfo_groups(key):
        copy_group(src, dst, key, group)


def copy_group(src: Conn, dst: Conn, key: bytes, group: dict[str, Any]) -> None:
    name = decoded(group["name"])
    read = group.get("entries-read")
    extra = ["ENTRIESREAD", read] if read is not None else []
    dst.execute_command("XGROUP", "CREATE", key, name, decoded(group["last-delivered-id"]), *extra)
    for consumer in src.xinfo_consumers(key, name):
        dst.execute_command("XGROUP", "CREATECONSUMER", key, name, decoded(consumer["name"]))
    start = "-"
    while True:
        pending = src.xpending_range(key, name, min=start, max="+", count=PENDING_COUNT)
        for item in pending:
            # XCLAIM … FORCE makes the pending entry anew, owned by the same consumer
            dst.xclaim(key, name, decoded(item["consumer"]), 0, [item["message_id"]],
                       idle=item["time_since_delivered"], retrycount=item["times_delivered"], force=True,
                       justid=True)
        if len(pending) < PENDING_COUNT:
            break
        start = "(" + decoded(pending[-1]["message_id"])


def _wait_rewrite(dst: Conn, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        persistence: dict[str, Any] = dst.info("persistence")
        if not persistence.get("aof_rewrite_in_progress") and not persistence.get("aof_rewrite_scheduled"):
            return
        time.sleep(0.05)
    # the copy is then removed and the state dir left as it was
    raise RuntimeError(f"the new server's AOF rewrite took longer than {timeout_s:g} s: nothing was changed; "
                       "run the move again")
