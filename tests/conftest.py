"""Shared fixtures: one real Redis server per test session, a clean database per test, and one
whole system (Redis, intake, edge, synth with the real model) for the end-to-end tests."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from listening import english_model_dir
from redis.asyncio import Redis

from castlog import CastStore
from servicekit import client_for
from streamtts.redisserver import RedisServer, free_port, start_server
from tests.support import outside
from tests.support.cluster import Cluster, start_cluster
from tests.support.system import SHARED_SETTINGS, System, running_system

REPO = Path(__file__).resolve().parent.parent
TEXTS = REPO / "texts"

# Tests read only what the repository holds (tests/support/outside.py fails any other read).
outside.install(REPO)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if outside.READS:  # even where a test swallowed the PermissionError
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nfiles outside the repository were opened: {sorted(set(outside.READS))}", file=sys.stderr)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_server(tmp_path_factory.mktemp("redis"), aof=False)
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
async def redis(redis_server: RedisServer) -> AsyncIterator[Redis]:
    client = client_for(redis_server.url)
    await client.flushall()
    yield client
    await client.aclose()


@pytest.fixture
def store(redis: Redis) -> CastStore:
    return CastStore(redis)


@pytest.fixture(scope="session")
def texts() -> dict[str, str]:
    """The repository's texts (short, paragraph, article, tricky) that every benchmark uses too."""
    found = {p.stem: p.read_text(encoding="utf-8") for p in sorted(TEXTS.glob("*.txt"))}
    if not {"short", "paragraph", "article", "tricky"} <= found.keys():
        pytest.fail(f"the texts are missing from {TEXTS}: restore texts/ from git")
    return found


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """A ``KOKORO_MODEL_DIR`` with all 54 checked voice packs (English ones: af_heart, …)."""
    try:
        return english_model_dir()
    except RuntimeError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A real 3-master, 3-replica Redis Cluster on loopback, started once per session when asked."""
    cluster = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def system(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Iterator[System]:
    """The system that the end-to-end tests share, started once a session when asked (the model's
    load and warm-up is most of a start): Redis with its AOF, as compose runs it, and the English
    packs. Each test speaks its own texts: a cast is content-addressed (the same text in the same
    voice is the same cast) and synth's chunk cache is shared, so another test's text would be a
    cast already made. A test that kills or restarts a process, or needs a setting that would
    change what another asserts, starts a system of its own (``running_system``)."""
    env = dict(SHARED_SETTINGS, KOKORO_MODEL_DIR=str(model_dir), INTAKE_WYOMING_PORT=str(free_port()))
    with running_system(tmp_path_factory.mktemp("system"), aof=True, **env) as system:
        yield system
