"""The archiver: finished casts' audio out of Redis into the blob store, deletes and retention.

It follows the receipts of ``progress/done`` as consumer group ``archiver`` (a restart re-reads
its pending receipts first) and scans every cast log now and then as a backstop, which also
runs the retention sweep. Every step is idempotent; see "The archive" in docs/design.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Literal

from redis.asyncio import Redis
from redis.exceptions import RedisError

from blobstore import BlobStore, BlobStoreError, digest
from castlog import PROGRESS_DONE, Consumer, Done, LogReader, Malformed, archive, cast_id_of, keys, read_trash, streams

from .config import ArchiverConfig
from .metrics import SynthMetrics

log = logging.getLogger(__name__)

GROUP = "archiver"
# Receipts taken per read, and the casts checked per SCAN step of the backstop.
READ_COUNT = 16
SCAN_COUNT = 500
# Trashed blobs deleted per round.
TRASH_COUNT = 100
# After a failure (the blob store or Redis down): wait this long before the next round.
ERROR_BACKOFF_S = 5.0
DAY_MS = 86_400_000
# A receipt pending this long with another archiver (one that died: a restarted synth has a new
# consumer name) is taken over.
CLAIM_IDLE_MS = 600_000

Outcome = Literal["archived", "already", "later", "unfinished", "gone"]


class ArchiveError(Exception):
    """The blob read back from the blob store is not what was written: Redis is left as it was."""


class Archiver:
    def __init__(self, redis: Redis, blobs: BlobStore, cfg: ArchiverConfig, consumer: str,
                 metrics: SynthMetrics | None = None, *, poll_s: float) -> None:
        self.metrics = metrics or SynthMetrics()
        self.redis, self.blobs, self.cfg = redis, blobs, cfg
        self.poll_s = poll_s  # SYNTH_POLL_S: the longest blocking read of receipts
        self.reader = LogReader(redis)  # the raw rows it packs and the last entries it sweeps
        self.receipts = Consumer(redis, GROUP, consumer, PROGRESS_DONE, lease_ms=CLAIM_IDLE_MS)
        self._next_scan = 0.0

    async def run(self) -> None:
        await self.receipts.create()
        while True:
            try:
                await self.round()
            except (RedisError, OSError, BlobStoreError, ArchiveError) as exc:
                self.metrics.archive_errors.inc()
                log.warning("archiver: %s; retrying in %.0fs", exc, ERROR_BACKOFF_S)
                await asyncio.sleep(ERROR_BACKOFF_S)

    async def round(self) -> None:
        """Empty the trash, scan when due, then archive the casts of pending or new receipts."""
        await self.empty_trash()
        if time.monotonic() >= self._next_scan:
            await self.scan()
            self._next_scan = time.monotonic() + self.cfg.scan_interval_s
        for receipt in await self.receipts.take(READ_COUNT, int(self.poll_s * 1000)):
            outcome = await self.archive_cast(_cast_id(receipt.fields))
            if outcome == "later":
                await asyncio.sleep(self.cfg.delay_s / 4)
                return  # receipts come in eos order: the rest are not due either
            await self.receipts.ack([receipt])

    async def archive_cast(self, cast_id: str) -> Outcome:
        """Archive one finished cast: pack, put, verify, then rewrite its log (idempotent)."""
        rows = await self.reader.stored(cast_id)
        if not rows:
            return "gone"
        last = rows[-1][1]
        if archive.descriptor_of(last) is not None:
            return "already"
        if last.get(b"e") != b"eos":
            return "unfinished"
        if int(last.get(b"ts", b"0")) + self.cfg.delay_s * 1000 > await self._now_ms():
            return "later"
        packed = archive.pack(cast_id, rows)
        d = packed.descriptor
        await self.blobs.put(d.key, packed.blob)
        size, sha = await digest(self.blobs, d.key)
        if (size, sha) != (d.size, d.sha256):
            raise ArchiveError(f"cast {cast_id}: {d.key} reads back {size} bytes {sha[:12]}, wrote {d.size} {d.sha256[:12]}")
        done = await archive.commit(self.redis, cast_id, packed)
        if done == 1:
            self.metrics.archived.inc()
            self.metrics.archive_bytes.inc(d.size)
            log.info("cast %s archived: %d bytes in %s", cast_id, d.size, d.key)
            return "archived"
        return "already" if done == 0 else "gone"

    async def empty_trash(self) -> None:
        """Delete the blobs of deleted casts, then their trash entries."""
        for entry_id, trash in await read_trash(self.redis, TRASH_COUNT):
            if trash is not None:
                await self.blobs.delete(trash.key)
            await self.redis.xdel(archive.TRASH, entry_id)

    async def scan(self) -> None:
        """Every cast log once: archive what was missed, sweep what retention lets go, measure."""
        now = await self._now_ms()
        live = archived = archived_bytes = 0
        async for key in self.redis.scan_iter(match=keys.cast_key_pattern(), count=SCAN_COUNT, _type="stream"):
            cast_id = cast_id_of(keys.decoded(key))
            if cast_id is None:
                continue
            row = await self.reader.last_row(cast_id)
            if row is None:
                continue
            fields = row[1]
            d = archive.descriptor_of(fields)
            terminal = fields.get(b"e") in (b"eos", b"error")
            if terminal and await self._expired(cast_id, int(fields.get(b"ts", b"0")), now):
                await archive.delete(self.redis, cast_id)
                self.metrics.swept.inc()
                continue
            if d is None and fields.get(b"e") == b"eos" and await self.archive_cast(cast_id) == "archived":
                d = await self.reader.descriptor(cast_id)
            if d is None:
                live += 1
            else:
                archived, archived_bytes = archived + 1, archived_bytes + d.size
        self.metrics.sweeps.inc()
        self.metrics.archived_casts.set(archived)
        self.metrics.archive_size.set(archived_bytes)
        self.metrics.redis_casts.set(live)
        used: Any = await self.redis.info("memory")
        self.metrics.redis_bytes_per_cast.set(int(used["used_memory"]) / max(1, live))

    async def _expired(self, cast_id: str, ended_ms: int, now_ms: int) -> bool:
        if self.cfg.retention_days <= 0:
            return False
        played = await self.redis.zscore(archive.PLAYED, cast_id)
        last = max(ended_ms, int(played or 0))
        return now_ms - last > self.cfg.retention_days * DAY_MS

    async def _now_ms(self) -> int:
        seconds, micros = await self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000


def _cast_id(fields: keys.Fields) -> str:
    """The cast a receipt names; "" for a malformed one (no cast: "gone", acknowledged)."""
    try:
        return streams.decode(Done, fields).id
    except Malformed:
        return ""
