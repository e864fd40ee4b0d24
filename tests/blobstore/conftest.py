"""The stores under test: a directory, and a bucket of a real SeaweedFS."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from blobstore import BlobStore, StoreConfig, open_store
from blobstore.s3 import S3Store
from tests.support.seaweed import seaweed, store_config

BUCKET = "streamtts-tests"


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One SeaweedFS and one bucket per session (each bucket costs SeaweedFS new volumes)."""
    with seaweed(tmp_path_factory.mktemp("seaweed")) as endpoint:
        # in a thread of its own: a session fixture may be set up while a test's loop runs
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, _create_bucket(store_config(endpoint, BUCKET))).result()
        yield endpoint


async def _create_bucket(cfg: StoreConfig) -> None:
    store = await open_store(cfg)
    assert isinstance(store, S3Store)
    await store._client.create_bucket(Bucket=store.bucket)
    await store.close()


def s3_config(endpoint: str) -> StoreConfig:
    """A fresh prefix of the session's bucket: each test sees an empty store."""
    return store_config(endpoint, BUCKET, "t" + secrets.token_hex(6))


@pytest.fixture(params=["file", "s3"])
async def blob_store(request: Any, tmp_path: Path) -> AsyncIterator[BlobStore]:
    if request.param == "file":
        cfg = StoreConfig((tmp_path / "archive").as_uri())
    else:
        cfg = s3_config(request.getfixturevalue("s3_endpoint"))
    store = await open_store(cfg)
    yield store
    await store.close()
