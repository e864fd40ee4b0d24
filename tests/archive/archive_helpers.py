"""Finished casts written straight into Redis, and an archiver over a test store."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from blobstore import BlobStore
from castlog import Audio, CastStore, Eos, Start, cast_key
from synth.archiver import Archiver
from synth.config import ArchiverConfig
from tests.edge.edge_helpers import Cast, audio_records, cast_id, write_cast

TEXTS = ("One sentence here.", "And a second one.", "A third, longer sentence follows it.", "The end.")


async def finished(store: CastStore, n: int | str = 0, *, body_bytes: int | None = 2_000) -> Cast:
    return await write_cast(store, cast_id(n), TEXTS, body_bytes=body_bytes)


async def retried(store: CastStore, n: int | str = "retried") -> Cast:
    """A cast whose second attempt resumed at sentence 2: the log holds audio that is not played."""
    cast = Cast(store, cast_id(n))
    await cast.submit(len(TEXTS))
    await cast.append(Start(attempt=1, resume_from=0, at=0))
    await cast.append(*audio_records(TEXTS[:3], body_bytes=1_500))
    await cast.append(Start(attempt=2, resume_from=2, at=1))
    second: list[Audio] = audio_records(TEXTS[2:], body_bytes=1_700, start_i=2, start_o=600)
    await cast.append(*second)
    await cast.append(Eos(sentences=len(TEXTS), audio_ms=1200, attempts=2))
    return cast


async def raw_rows(redis: Redis, cid: str) -> list[Any]:
    return list(await redis.xrange(cast_key(cid)))


def without_p(rows: list[Any]) -> list[Any]:
    """``rows`` less their predecessor's stamp ``p``, which the archive leaves out (only the live
    tail reads it): the rest must come back byte for byte."""
    return [(i, {k: v for k, v in f.items() if k != b"p"}) for i, f in rows]


def archiver(redis: Redis, blobs: BlobStore, consumer: str = "test-archiver", **cfg: Any) -> Archiver:
    settings = {"delay_s": 0.0, **cfg}
    return Archiver(redis, blobs, ArchiverConfig(**settings), consumer=consumer, poll_s=0.2)
