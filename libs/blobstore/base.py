"""The interface every backend implements, and what they share."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from servicekit.settings import Settings, setting

# Bytes per piece when a blob is streamed (read back, served).
PIECE_BYTES = 64 * 1024


class BlobStoreError(Exception):
    """The store failed or refused (missing blob, bad URL, an I/O or S3 error)."""


@dataclass(frozen=True)
class StoreConfig(Settings):
    """Where the archive is: ``file:///dir`` or ``s3://bucket/prefix``, and S3's settings. A
    service's config holds it as ``StoreConfig | None``: None while ARCHIVE_URL is unset."""

    url: str = setting("ARCHIVE_URL", shown="unset (`streamtts up`: `file://<state dir>/archive`)",
                       doc="where finished casts' audio goes once it leaves Redis: `file:///dir` or "
                           "`s3://bucket/prefix`; unset keeps everything in Redis "
                           "(synth archives, edge and intake read)")
    s3_endpoint: str | None = setting("ARCHIVE_S3_ENDPOINT", None, shown="AWS",
                                      doc="an S3-compatible store's URL (MinIO, Ceph RGW, Garage, SeaweedFS)")
    s3_region: str = setting("ARCHIVE_S3_REGION", "us-east-1", doc="the S3 region")
    s3_access_key: str | None = setting("ARCHIVE_S3_ACCESS_KEY", None, shown="botocore's chain",
                                        doc="the S3 credentials (unset: `AWS_*` variables, profile or instance role)")
    s3_secret_key: str | None = setting("ARCHIVE_S3_SECRET_KEY", None, shown="botocore's chain", secret=True,
                                        doc="its secret")


class BlobStore(Protocol):
    """Named immutable blobs. ``put`` is atomic: a reader sees the whole blob or none."""

    url: str

    async def put(self, key: str, data: bytes) -> None: ...

    async def size(self, key: str) -> int | None:
        """Bytes of the blob, None when there is none."""
        ...

    def read(self, key: str, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        """Bytes ``start`` to ``end`` (exclusive; None: to the end), in pieces."""
        ...

    async def delete(self, key: str) -> None:
        """Remove the blob; no error when there is none."""
        ...

    async def close(self) -> None: ...


async def digest(blobs: BlobStore, key: str) -> tuple[int, str]:
    """Size and SHA-256 (hex) of a stored blob, read back from the store piece by piece."""
    h, n = hashlib.sha256(), 0
    async for piece in blobs.read(key):
        h.update(piece)
        n += len(piece)
    return n, h.hexdigest()
