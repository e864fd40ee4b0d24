"""blobstore: where finished audio lives once it leaves Redis (a directory or any S3 API).

Knows nothing of casts or Redis: a :class:`BlobStore` puts, reads (by byte range, streamed),
measures and deletes named blobs. :func:`open_store` picks the backend from a URL.
"""

from .base import BlobStore, BlobStoreError, StoreConfig, digest
from .files import FileStore
from .open import open_store
from .s3 import S3Store

__all__ = ["BlobStore", "BlobStoreError", "FileStore", "S3Store", "StoreConfig", "digest", "open_store"]
