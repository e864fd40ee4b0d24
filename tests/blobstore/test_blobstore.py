"""Both backends behind one interface: atomic put, ranged streamed reads, digest, delete."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from blobstore import BlobStore, BlobStoreError, FileStore, StoreConfig, digest, open_blob_store
from blobstore.base import PIECE_BYTES


async def read_all(store: BlobStore, key: str, start: int = 0, end: int | None = None) -> bytes:
    return b"".join([piece async for piece in store.read(key, start, end)])


async def test_put_then_read_back_the_same_bytes_and_digest(blob_store: BlobStore) -> None:
    data = os.urandom(3 * PIECE_BYTES + 123)
    await blob_store.put("casts/abc/1-x.bin", data)
    assert await blob_store.size("casts/abc/1-x.bin") == len(data)
    assert await read_all(blob_store, "casts/abc/1-x.bin") == data
    assert await digest(blob_store, "casts/abc/1-x.bin") == (len(data), hashlib.sha256(data).hexdigest())


async def test_ranges_read_exactly_their_bytes(blob_store: BlobStore) -> None:
    data = os.urandom(2 * PIECE_BYTES + 7)
    await blob_store.put("k.bin", data)
    for start, end in [(0, 1), (5, 17), (PIECE_BYTES - 1, PIECE_BYTES + 2), (len(data) - 3, None), (10, 10)]:
        assert await read_all(blob_store, "k.bin", start, end) == data[start:end]


async def test_reads_come_in_pieces_not_whole(blob_store: BlobStore) -> None:
    await blob_store.put("big.bin", os.urandom(4 * PIECE_BYTES))
    sizes = [len(p) async for p in blob_store.read("big.bin")]
    assert len(sizes) >= 4 and max(sizes) <= PIECE_BYTES


async def test_missing_blob_has_no_size_and_delete_is_idempotent(blob_store: BlobStore) -> None:
    assert await blob_store.size("nope.bin") is None
    await blob_store.put("gone.bin", b"x")
    await blob_store.delete("gone.bin")
    await blob_store.delete("gone.bin")
    assert await blob_store.size("gone.bin") is None
    with pytest.raises(BlobStoreError):
        await read_all(blob_store, "gone.bin")


async def test_overwrite_replaces_whole_blob(blob_store: BlobStore) -> None:
    await blob_store.put("k.bin", b"a" * 1000)
    await blob_store.put("k.bin", b"b" * 10)
    assert await read_all(blob_store, "k.bin") == b"b" * 10


async def test_file_put_leaves_no_temporary_files(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.put("casts/x/y.bin", b"data")
    assert sorted(p.name for p in (tmp_path / "casts" / "x").iterdir()) == ["y.bin"]


async def test_file_keys_cannot_leave_the_root(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "root")
    for key in ["../escape.bin", "a//b", "", "a/./b"]:
        with pytest.raises(BlobStoreError):
            await store.put(key, b"x")


@pytest.mark.parametrize("url", ["http://x/y", "file://host/dir", "s3://", "archive"])
async def test_bad_urls_say_what_to_use(url: str) -> None:
    with pytest.raises(BlobStoreError, match="ARCHIVE_URL"):
        await open_blob_store(StoreConfig(url))
