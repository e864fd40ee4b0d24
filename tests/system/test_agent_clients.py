"""The voice-agent frameworks' own released clients against the real system (intake, synth with the
real model, edge), configured exactly as docs/integrations.md writes it: Pipecat's Deepgram
services (WebSocket and HTTP) in a real pipeline (an answer, the user talking over it, a second
turn) and LiveKit Agents' ``deepgram.TTS`` (``synthesize()`` and ``stream()``, each whole and cut
short). Each framework runs in .venv-agents (scripts/test makes it from tests/agents/constraints.txt:
their dependencies never meet the project's); its client script (tests/agents/) reports what it
heard, and this test checks the audio and, through Redis and edge, that each cut-short cast was
cancelled and the others were not."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from redis import Redis

from castlog.keys import cast_key_pattern
from tests.support.system import System

pytestmark = [pytest.mark.model, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
AGENTS_PYTHON = ROOT / ".venv-agents" / "bin" / "python"
DOC = ROOT / "docs" / "integrations.md"
DOC_ORIGIN = "streamtts.local:8080"  # the host the doc's snippets name; the test's intake stands in
CLIENT_S = 400  # a client script's whole run (the real model on a shared CPU); it ends on its own signals
SETTLE_S = 60.0  # a cancelled cast's end is written by the worker once the chunk in hand is done
SPEECH_RMS = 0.02  # Kokoro's speech is far louder; silence is 0


def doc_settings(call: str) -> dict[str, Any]:
    """The keyword arguments of the doc's ``call(...)`` snippet: literals as written,
    ``settings=X.Settings(voice=...)`` as its ``voice``; a variable (``aiohttp_session=session``)
    is the client script's own."""
    tree = ast.parse("\n".join(re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func).endswith(call)]
    assert len(calls) == 1, f"docs/integrations.md should show {call}(...) once, in a python block"
    out: dict[str, Any] = {}
    for keyword in calls[0].keywords:
        if keyword.arg == "settings":
            assert isinstance(keyword.value, ast.Call)
            out.update({k.arg: ast.literal_eval(k.value) for k in keyword.value.keywords if k.arg})
        elif keyword.arg and not isinstance(keyword.value, ast.Name):
            out[keyword.arg] = ast.literal_eval(keyword.value)
    return out


@pytest.fixture(scope="module")
def agents_python() -> Path:
    if not AGENTS_PYTHON.exists():
        pytest.fail("no .venv-agents: run scripts/test, which makes it from tests/agents/constraints.txt")
    return AGENTS_PYTHON


def with_origin(settings: dict[str, Any], system: System) -> dict[str, Any]:
    intake = system.url("intake").split("//", 1)[1]
    return {k: v.replace(DOC_ORIGIN, intake) if k == "base_url" else v for k, v in settings.items()}


def run_client(python: Path, script: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([str(python), str(ROOT / "tests" / "agents" / script), *args], capture_output=True,
                          text=True, timeout=CLIENT_S, check=False)
    assert done.returncode == 0, f"{script} failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def cast_ids(system: System) -> set[str]:
    redis = Redis.from_url(system.redis.url)
    try:
        return {k.decode().rsplit("/", 1)[1] for k in redis.scan_iter(cast_key_pattern())}
    finally:
        redis.close()


def state(system: System, cast_id: str) -> dict[str, Any]:
    with urllib.request.urlopen(system.url("edge", f"/api/casts/{cast_id}"), timeout=10) as answer:  # noqa: S310
        return json.loads(answer.read())  # type: ignore[no-any-return]


def settled_states(system: System, ids: set[str]) -> list[dict[str, Any]]:
    """Each cast's state from edge once it ended (a cancelled one ends when its chunk in hand is done)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        states = [state(system, i) for i in sorted(ids)]
        if all(s["status"] in ("done", "error") for s in states) or time.monotonic() > deadline:
            return states
        time.sleep(0.5)


def assert_speech(path: Path, rate: int, seconds: tuple[float, float]) -> None:
    pcm = np.frombuffer(path.read_bytes(), "<i2").astype(np.float32) / 32768
    duration = len(pcm) / rate
    assert seconds[0] <= duration <= seconds[1], f"{path.name}: {duration:.2f} s of audio"
    assert float(np.sqrt(np.mean(pcm**2))) > SPEECH_RMS, f"{path.name} is silence"


@pytest.mark.parametrize(("kind", "call"), [("ws", "DeepgramTTSService"), ("http", "DeepgramHttpTTSService")])
def test_pipecats_deepgram_service_speaks_is_interrupted_and_speaks_again(
    system: System, agents_python: Path, tmp_path: Path, kind: str, call: str
) -> None:
    settings = with_origin(doc_settings(call), system)
    before = cast_ids(system)
    heard = run_client(agents_python, "pipecat_client.py", kind, json.dumps(settings), str(tmp_path))
    assert heard["errors"] == [] and heard["turn1_bytes"] >= 16_000  # half a second before the interruption
    assert_speech(tmp_path / "turn2.pcm", 16_000, (0.8, 4.0))  # "Sure, the second turn is short."
    states = settled_states(system, cast_ids(system) - before)
    assert all(s["status"] == "done" for s in states), states
    if kind == "ws":  # each turn is a live cast: the interrupted one cut short by Clear, the next one whole
        assert sorted(s["cancelled"] for s in states) == [False, True], states
        assert all(s["finished"] >= 1 for s in states), states
    else:  # a request per sentence: the one being spoken, perhaps the next; never the rest of the answer
        second = [s for s in states if s["title"] == "Sure, the second turn is short."]
        assert len(second) == 1 and not second[0]["cancelled"], states
        first = [s for s in states if s not in second]
        assert 1 <= len(first) <= 2 and all(s["title"].startswith("This is sentence number") for s in first), states


def test_livekits_deepgram_tts_synthesizes_and_streams_and_a_barge_in_cancels(
    system: System, agents_python: Path, tmp_path: Path
) -> None:
    settings = with_origin(doc_settings("deepgram.TTS"), system)
    assert settings["base_url"].endswith("/v1/speak")  # LiveKit's base_url is the route, not the origin
    before = cast_ids(system)
    heard = run_client(agents_python, "livekit_client.py", json.dumps(settings), str(tmp_path))
    rate = heard["sample_rate"]
    for name in ("synthesize", "stream"):  # "Hello from LiveKit. This answer is spoken whole."
        assert_speech(tmp_path / f"{name}.pcm", rate, (1.5, 6.0))
        assert heard[f"{name}_cut_bytes"] >= rate  # half a second before the barge-in
    states = settled_states(system, cast_ids(system) - before)
    cut = [s for s in states if s["cancelled"]]
    assert len(cut) == 2, states  # synthesize()'s long text (one cast) and stream()'s turn (a live cast)
    assert all(s["status"] == "done" for s in states), states
