"""The live session over WebRTC end to end with the real model: an aiortc peer sends text on the
control channel and hears speech on the track, in the order the cast's link replays it."""

from __future__ import annotations

import subprocess
import sys
import time
import wave
from pathlib import Path

import numpy as np
import pytest
from aiohttp import ClientSession, ClientTimeout

import chunking
from tests.support.rtcpeer import connect
from tests.support.system import System

pytestmark = [pytest.mark.model, pytest.mark.timeout(300)]

# Texts of their own: the session's system (tests/conftest.py) has heard test_live's, and a sentence
# it has made comes from its chunk cache.
TEXT = "Good evening. The answer is forty three."
AGENT_TEXT = "Hi again. Bye for now."


@pytest.mark.rule("webrtc-same-session")
async def test_an_aiortc_peer_hears_speech_for_text_sent_on_the_data_channel(system: System) -> None:
    async with ClientSession(timeout=ClientTimeout(total=240)) as http:
        peer = await connect(http.post, system.url("intake", "/v1/audio/speech/webrtc"))
        try:
            peer.send({"type": "start"})
            cast = await peer.next()
            assert cast["type"] == "cast" and cast["format"] == "opus", cast
            sent = time.monotonic()
            for word in TEXT.split(" "):  # token by token, as an agent streams them
                peer.send({"type": "text", "text": word + " "})
            peer.send({"type": "flush"})
            peer.send({"type": "close"})
            got = await peer.until("closed", timeout_s=200)
            loud = peer.loud(sent)
            async with http.get(system.url("edge", f"/api/casts/{cast['id']}/records?seq_num=0")) as response:
                assert response.status == 200
        finally:
            await peer.close()
    chunks = chunking.split_text(TEXT)
    assert [m["text"] for m in got if m["type"] == "sentence"] == chunks
    done = next(m for m in got if m["type"] == "done")
    assert done["sentences"] == len(chunks) and got[-1]["code"] == 1000
    # speech, not silence: most of the cast's 20 ms frames carry sound (pauses between words are quiet)
    assert len(loud) * 20 >= done["audio_ms"] * 0.5


def test_the_example_agent_talks_over_webrtc_and_records_the_track(system: System, tmp_path: Path) -> None:
    out = tmp_path / "answer.wav"
    result = subprocess.run(
        [sys.executable, str(Path(__file__).resolve().parents[2] / "examples" / "webrtc_agent.py"),
         "--url", system.url("intake", ""), "--text", AGENT_TEXT, "--tokens-per-s", "50",
         "--out", str(out)],
        capture_output=True, text=True, timeout=200,
    )
    assert result.returncode == 0, result.stderr
    assert "sentence 1: Bye for now." in result.stderr and '"type": "closed", "code": 1000' in result.stderr
    with wave.open(str(out)) as played:
        samples = np.frombuffer(played.readframes(played.getnframes()), dtype="<i2").reshape(-1, 2)
    loud = np.sqrt(np.mean(samples.reshape(-1, 960 * 2).astype(np.float64) ** 2, axis=1)) > 300  # per 20 ms
    assert loud.sum() * 20 >= 500  # more than half a second of speech in what played
