"""The stores that the archive and blob store tests run against: a directory, and a prefix of a
bucket of a real SeaweedFS (one server per session). The conftests of both import these."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from blobstore import BlobStore, StoreConfig, open_blob_store
from tests.support.seaweed import fresh_prefix, seaweed_with_bucket


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with seaweed_with_bucket(tmp_path_factory.mktemp("seaweed")) as endpoint:
        yield endpoint


@pytest.fixture(params=["file", "s3"])
async def blob_store(request: Any, tmp_path: Path) -> AsyncIterator[BlobStore]:
    if request.param == "file":
        cfg = StoreConfig((tmp_path / "archive").as_uri())
    else:
        cfg = fresh_prefix(request.getfixturevalue("s3_endpoint"))
    store = await open_blob_store(cfg)
    yield store
    await store.close()
