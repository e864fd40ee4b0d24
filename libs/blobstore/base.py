"""The interface every backend implements, and what they share."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

# Bytes per piece when a blob is streamed (read back, served).
PIECE_BYTES = 64 * 1024


class BlobStoreError(Exception):
    """The store failed or refused (missing blob, bad URL, an I/O or S3 error)."""


@dataclass(frozen=True)
class StoreConfig:
    """Where the archive is: ``file:///dir`` or ``s3://bucket/prefix``, and S3's settings."""

    url: str
    s3_endpoint: str | None = None  # e.g. http://minio:9000; None: AWS
    s3_region: str = "us-east-1"
    s3_access_key: str | None = None  # None: botocore's usual chain (env, profile, role)
    s3_secret_key: str | None = None

    @classmethod
    def from_settings(cls, get: Callable[[str, Callable[[str], str], str | None], str | None]) -> StoreConfig | None:
        """From a service's settings getter (``servicekit.Settings.get``): None when ARCHIVE_URL is unset."""
        url = get("ARCHIVE_URL", str, None)
        if not url:
            return None
        return cls(
            url=url,
            s3_endpoint=get("ARCHIVE_S3_ENDPOINT", str, None) or None,
            s3_region=get("ARCHIVE_S3_REGION", str, None) or "us-east-1",
            s3_access_key=get("ARCHIVE_S3_ACCESS_KEY", str, None) or None,
            s3_secret_key=get("ARCHIVE_S3_SECRET_KEY", str, None) or None,
        )


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
