"""The protocol's own clients follow a live cast made by the real model to its end, with the
bytes of its MP3: Python's ``durable-streams`` (PyPI) and the TypeScript ``@durable-streams/client``
(npm, pinned with the conformance suite) by long-poll and by SSE."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from aiohttp import ClientSession, ClientTimeout

from tests.support.system import System

pytestmark = [pytest.mark.model, pytest.mark.timeout(300), pytest.mark.rule("ds-casts")]

RUNNER = Path(__file__).parent / "conformance"
TEXT = "Durable streams follow this cast while it is made. Then it ends."
FOLLOW_S = 240.0
# The session's system (tests/conftest.py): a TEXT no other test speaks, so that the cast is made
# while the clients follow it; reads are not what this is about, and that system's edge has no read
# limit in their way (SHARED_SETTINGS in tests/support/system.py).


async def _python_follow(url: str, into: bytearray) -> None:
    """The Python client (0.1.0) reads by long-poll until it is stopped: it knows no EOF yet."""
    from durable_streams import astream  # the test extra's (pyproject.toml); imported here so that
    # a checkout without it still collects every other test
    async with astream(url, offset="-1", live="long-poll") as res:
        async for chunk in res:
            into += chunk


async def _node_follow(url: str, out: Path, live: str) -> dict:
    npx = shutil.which("node")
    assert npx is not None, "node is needed (scripts/test installs it)"
    proc = await asyncio.create_subprocess_exec(npx, "follow.mjs", url, str(out), live, cwd=RUNNER,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(proc.communicate(), FOLLOW_S)
    assert proc.returncode == 0, stderr.decode(errors="replace")[-2000:]
    return dict(json.loads(stdout.decode().strip().splitlines()[-1]))


async def test_python_and_typescript_clients_follow_a_live_cast_to_its_end(system: System, tmp_path: Path) -> None:
    assert (RUNNER / "node_modules" / "@durable-streams" / "client").is_dir(), f"run `npm ci` in {RUNNER}"
    async with ClientSession(timeout=ClientTimeout(total=FOLLOW_S)) as http:
        async with http.post(system.url("intake", "/api/casts"), json={"text": TEXT}) as response:
            assert response.status == 201, await response.text()
            cid = (await response.json())["id"]
        url = system.url("edge", f"/v1/stream/casts/{cid}")
        python_bytes = bytearray()
        python = asyncio.create_task(_python_follow(url, python_bytes))
        node_poll = asyncio.create_task(_node_follow(url, tmp_path / "poll.mp3", "long-poll"))
        node_sse = asyncio.create_task(_node_follow(url, tmp_path / "sse.mp3", "sse"))
        polled, streamed = await asyncio.gather(node_poll, node_sse)  # each ends at the stream's EOF
        async with http.get(system.url("edge", f"/api/casts/{cid}/audio.mp3")) as response:
            mp3 = await response.read()
        for out, summary in ((tmp_path / "poll.mp3", polled), (tmp_path / "sse.mp3", streamed)):
            assert summary["closed"] is True
            assert out.read_bytes() == mp3
        for _ in range(int(FOLLOW_S * 10)):  # the Python client has read to the end by now, or soon
            if len(python_bytes) >= len(mp3) or python.done():
                break
            await asyncio.sleep(0.1)
        python.cancel()
        [ended] = await asyncio.gather(python, return_exceptions=True)
        if isinstance(ended, Exception):  # a client that failed (or is not installed) says so
            raise ended
        assert bytes(python_bytes) == mp3
        async with http.head(url) as response:
            assert response.headers["Stream-Closed"] == "true"
