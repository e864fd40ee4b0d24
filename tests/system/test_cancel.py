"""Barge-in end to end (intake, synth with the real model, edge): a live session's cancel stops
the audio at once (the chunk in hand is thrown away), and the link replays what was spoken.
Prints the figures: cancel -> last audio byte and -> done, against one chunk's model time."""

from __future__ import annotations

import json
import re
import time

import aiohttp
import pytest
from aiohttp import ClientSession, ClientTimeout

import chunking
from tests.support.system import System

pytestmark = [pytest.mark.model, pytest.mark.timeout(300)]

LONG = " ".join(f"This is sentence number {n}, spoken while the user may interrupt it." for n in range(1, 13))


async def _model_s(http: ClientSession, system: System) -> tuple[float, float]:
    """(seconds the model spent on chunks, chunks) so far, from synth's /metrics."""
    async with http.get(system.url("synth", "/metrics")) as response:
        text = await response.text()

    def value(name: str) -> float:
        return float(re.search(rf'^{name}\{{stage="synth"\}} (\S+)$', text, re.MULTILINE).group(1))  # type: ignore[union-attr]

    return value("streamtts_synth_chunk_seconds_sum"), value("streamtts_synth_chunk_seconds_count")


@pytest.mark.rule("cancel-cuts-short")
async def test_barge_in_stops_the_audio_within_the_chunk_in_hand(system: System) -> None:
    async with ClientSession(timeout=ClientTimeout(total=280)) as http:
        ws = await http.ws_connect(system.url("intake", "/v1/audio/speech/live"))
        await ws.send_json({"type": "start", "voice": "af_heart", "format": "pcm"})
        cast_id = json.loads((await ws.receive()).data)["id"]
        await ws.send_json({"type": "text", "text": LONG})
        frames_before, cancelled_at, last_frame_at, frames_after, done_at = 0, 0.0, 0.0, 0, 0.0
        done: dict[str, object] = {}
        at_cancel = (0.0, 0.0)
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.BINARY:
                if cancelled_at:
                    frames_after += 1
                    last_frame_at = time.monotonic()
                else:
                    frames_before += 1
                    if frames_before == 2:  # the user talks over the second sentence
                        await ws.send_json({"type": "cancel"})
                        cancelled_at = last_frame_at = time.monotonic()
                        at_cancel = await _model_s(http, system)  # the chunks made so far
            elif json.loads(msg.data)["type"] == "done":
                done, done_at = json.loads(msg.data), time.monotonic()
        async with http.get(system.url("edge", f"/api/casts/{cast_id}")) as response:
            state = await response.json()
    planned = len(chunking.split_text(LONG))
    spoken = frames_before + frames_after
    assert done.get("cancelled") is True and done["sentences"] == spoken < planned
    assert frames_after <= 1, "at most a chunk whose append was on its way"
    assert state["cancelled"] is True and state["status"] == "done" and state["finished"] == spoken
    chunk_s = at_cancel[0] / max(at_cancel[1], 1.0)  # a chunk's model time (the mean so far)
    ratio = (last_frame_at - cancelled_at) / chunk_s
    print(f"\ncancel -> last audio byte: {last_frame_at - cancelled_at:.3f} s, -> done: {done_at - cancelled_at:.3f} s; "
          f"a chunk's model time (mean): {chunk_s:.3f} s; ratio {ratio:.2f}; sentences spoken {spoken} of {planned}, "
          f"{frames_after} after the cancel")
