"""The S3 backend (any S3 API: AWS, MinIO, Ceph RGW, Garage, SeaweedFS) on aiobotocore."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError

from .base import PIECE_BYTES, BlobStoreError, StoreConfig

# Path-style addressing works with every S3 API (virtual hosts need DNS per bucket).
_CONFIG = AioConfig(s3={"addressing_style": "path"}, retries={"max_attempts": 3, "mode": "standard"})
_MISSING = {"404", "NoSuchKey", "NotFound"}


class S3Store:
    """Blobs as objects under ``prefix`` in ``bucket``; one PUT per blob is atomic in S3."""

    def __init__(self, cfg: StoreConfig, bucket: str, prefix: str) -> None:
        self.cfg, self.bucket, self.prefix = cfg, bucket, prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        self._stack = AsyncExitStack()
        self._client: Any = None

    async def open(self) -> S3Store:
        session = get_session()
        self._client = await self._stack.enter_async_context(session.create_client(
            "s3", endpoint_url=self.cfg.s3_endpoint, region_name=self.cfg.s3_region,
            aws_access_key_id=self.cfg.s3_access_key, aws_secret_access_key=self.cfg.s3_secret_key,
            config=_CONFIG,
        ))
        return self

    def name(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    async def put(self, key: str, data: bytes) -> None:
        try:
            await self._client.put_object(Bucket=self.bucket, Key=self.name(key), Body=data)
        except (BotoCoreError, ClientError) as exc:
            raise BlobStoreError(f"PUT {key} to {self.url} failed: {exc}") from exc

    async def size(self, key: str) -> int | None:
        try:
            head = await self._client.head_object(Bucket=self.bucket, Key=self.name(key))
        except (BotoCoreError, ClientError) as exc:
            if isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") in _MISSING:
                return None
            raise BlobStoreError(f"HEAD {key} in {self.url} failed: {exc}") from exc
        return int(head["ContentLength"])

    async def read(self, key: str, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        if end is not None and end <= start:
            return
        span = f"bytes={start}-{end - 1 if end is not None else ''}"
        try:
            reply = await self._client.get_object(Bucket=self.bucket, Key=self.name(key), Range=span)
        except (BotoCoreError, ClientError) as exc:
            raise BlobStoreError(f"GET {key} from {self.url} failed: {exc}") from exc
        async with reply["Body"] as body:
            async for piece in body.iter_chunks(PIECE_BYTES):
                yield piece

    async def delete(self, key: str) -> None:
        try:
            await self._client.delete_object(Bucket=self.bucket, Key=self.name(key))
        except (BotoCoreError, ClientError) as exc:
            raise BlobStoreError(f"DELETE {key} in {self.url} failed: {exc}") from exc

    async def close(self) -> None:
        await self._stack.aclose()
