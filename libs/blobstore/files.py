"""The filesystem backend: one file per blob under a root directory."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

from .base import PIECE_BYTES, BlobStoreError

# The first piece is read on the event loop: a thread's answer waits for the GIL, which a busy
# loop holds for up to its switch interval (5 ms); a small read from the page cache takes far
# less. The rest comes in PIECE_BYTES reads in a thread, where a slow disk blocks nothing.
FIRST_PIECE_BYTES = 16 * 1024


class FileStore:
    """Blobs as files: written to a temporary name, fsynced, renamed (atomic on POSIX)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.url = self.root.as_uri()

    def path(self, key: str) -> Path:
        parts = key.split("/")
        if not key or any(p in ("", ".", "..") for p in parts):
            raise BlobStoreError(f"not a blob key: {key!r}")
        return self.root.joinpath(*parts)

    async def put(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(write_atomically, self.path(key), data)

    async def size(self, key: str) -> int | None:
        try:
            return (await asyncio.to_thread(self.path(key).stat)).st_size
        except FileNotFoundError:
            return None

    async def read(self, key: str, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        path = self.path(key)
        left = None if end is None else max(0, end - start)
        try:  # open, seek and the first piece here, not in a thread: the first byte comes sooner
            f, piece = _open_read(path, start, min(_want(left), FIRST_PIECE_BYTES))
        except FileNotFoundError as exc:
            raise BlobStoreError(f"no blob {key!r} in {self.url}") from exc
        try:
            while piece:
                if left is not None:
                    left -= len(piece)
                yield piece
                if left == 0:
                    break
                piece = await asyncio.to_thread(f.read, _want(left))
        finally:
            f.close()

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self.path(key).unlink, missing_ok=True)

    async def close(self) -> None:
        return None


def write_atomically(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` whole or not at all, even after a power cut: written to a temporary
    name in its folder (made if missing), fsynced, renamed over it. The one atomic file write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself survives a power cut
    finally:
        os.close(fd)


def _want(left: int | None) -> int:
    return PIECE_BYTES if left is None else min(PIECE_BYTES, left)


def _open_read(path: Path, start: int, size: int) -> tuple[BinaryIO, bytes]:
    f = open(path, "rb")  # noqa: SIM115 - closed by the reader
    try:
        f.seek(start)
        return f, f.read(size)
    except BaseException:
        f.close()
        raise
