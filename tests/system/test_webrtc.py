"""The live session over WebRTC end to end with the real model: an aiortc peer sends text on the
control channel and hears speech on the track, in the order the cast's link replays it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from aiohttp import ClientSession, ClientTimeout

import castlog
from tests.support.rtcpeer import connect
from tests.support.system import System, running_system

pytestmark = [pytest.mark.model, pytest.mark.timeout(300)]

TEXT = "Good morning. The answer is forty two."


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    with running_system(tmp_path_factory.mktemp("webrtc"), INTAKE_RATE="1000", INTAKE_BURST="1000",
                        WEBRTC_UDP_PORTS="41300-41320") as system:
        yield system


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
    chunks = castlog.split_text(TEXT)
    assert [m["text"] for m in got if m["type"] == "sentence"] == chunks
    done = next(m for m in got if m["type"] == "done")
    assert done["sentences"] == len(chunks) and got[-1]["code"] == 1000
    # speech, not silence: most of the cast's 20 ms frames carry sound (pauses between words are quiet)
    assert len(loud) * 20 >= done["audio_ms"] * 0.5
