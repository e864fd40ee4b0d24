"""The stores under test (tests/support/stores.py): a directory, a prefix of a real SeaweedFS bucket."""

from tests.support.stores import blob_store, s3_endpoint

__all__ = ["blob_store", "s3_endpoint"]
