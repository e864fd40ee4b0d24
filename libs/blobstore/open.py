"""``open_blob_store(cfg)``: the backend that ``cfg.url`` names."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from .base import BlobStore, BlobStoreError, StoreConfig
from .files import FileStore


async def open_blob_store(cfg: StoreConfig) -> BlobStore:
    """A ready store for ``file:///dir`` or ``s3://bucket/prefix``; close it with ``close()``."""
    parts = urlsplit(cfg.url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path:
            raise BlobStoreError(f"ARCHIVE_URL {cfg.url!r}: a file URL needs an absolute path, file:///dir")
        return FileStore(unquote(parts.path))
    if parts.scheme == "s3":
        if not parts.netloc:
            raise BlobStoreError(f"ARCHIVE_URL {cfg.url!r}: an S3 URL names a bucket, s3://bucket/prefix")
        from .s3 import S3Store  # aiobotocore only where S3 is used

        return await S3Store(cfg, parts.netloc, parts.path).open()
    raise BlobStoreError(f"ARCHIVE_URL {cfg.url!r}: use file:///dir or s3://bucket/prefix")
