"""The tests' Redis Cluster (3 masters, 3 replicas on loopback): the builder is the project's
(bench/rediscluster.py, the benchmarks use it too); tests/conftest.py's session fixture
``redis_cluster`` starts one when a test asks and stops it at the end."""

from __future__ import annotations

from rediscluster import Cluster, Node, start_cluster

__all__ = ["Cluster", "Node", "start_cluster"]
