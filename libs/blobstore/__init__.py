"""blobstore: where finished audio lives once it leaves Redis (a directory or any S3 API).

The S3 backend (``blobstore.s3``, needing aiobotocore: the ``s3`` extra) is imported only when
an ``s3://`` URL is opened. Knows nothing of casts or Redis: a :class:`BlobStore` puts, reads (by byte range, streamed),
measures and deletes named blobs. :func:`open_blob_store` picks the backend from a URL.
"""

from .base import BlobStore, BlobStoreError, StoreConfig, digest
from .files import FileStore
from .open import open_blob_store

__all__ = ["BlobStore", "BlobStoreError", "FileStore", "StoreConfig", "digest", "open_blob_store"]
