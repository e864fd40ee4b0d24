"""LiveKit Agents' own Deepgram TTS plugin against StreamTTS, as an agent calls it: ``synthesize()``
(Deepgram's REST route) and ``stream()`` (its WebSocket), each spoken whole, then each cut short
after its first audio (a barge-in: the agent closes the stream).

Run by tests/system/test_agent_clients.py with .venv-agents/bin/python (LiveKit and its
dependencies live there, never in the project's venv):

    livekit_client.py SETTINGS_JSON OUT_DIR

SETTINGS_JSON holds ``deepgram.TTS``'s keyword arguments exactly as docs/integrations.md writes
them; OUT_DIR receives synthesize.pcm and stream.pcm (16-bit mono). It prints one JSON object:
the sample rate, the bytes of each whole answer, and those heard before each barge-in.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from livekit.agents import APIConnectOptions
from livekit.agents.tts import SynthesizedAudio
from livekit.plugins import deepgram

WHOLE = "Hello from LiveKit. This answer is spoken whole."
LONG = " ".join(f"This is sentence number {n} of a long answer that the user will interrupt." for n in range(1, 9))
BARGE_IN_BYTES = 24_000  # half a second at 24 kHz (16-bit): the answer is being spoken
# The plugin waits 10 s for each message by default, and retries: on a loaded CPU a sentence may
# take longer; no retry, so that a failure shows as one.
PATIENT = APIConnectOptions(max_retry=0, timeout=120.0)


async def heard(events: AsyncIterator[SynthesizedAudio], until: int | None = None) -> bytes:
    """The audio of ``events``, all of it or (``until``) once that many bytes came."""
    audio = bytearray()
    async for event in events:
        audio += event.frame.data.tobytes()
        if until is not None and len(audio) >= until:
            break
    return bytes(audio)


async def streamed(tts: deepgram.TTS, text: str, until: int | None = None) -> bytes:
    """``stream()`` as an agent feeds it: the LLM's words as they come, then the end of the input."""
    stream = tts.stream(conn_options=PATIENT)
    try:
        for word in text.split(" "):
            stream.push_text(word + " ")
        stream.end_input()
        return await heard(stream, until)
    finally:
        await stream.aclose()  # mid-answer: the agent's barge-in


async def synthesized(tts: deepgram.TTS, text: str, until: int | None = None) -> bytes:
    stream = tts.synthesize(text, conn_options=PATIENT)
    try:
        return await heard(stream, until)
    finally:
        await stream.aclose()


async def main(settings: dict[str, object], out: Path) -> dict[str, object]:
    async with aiohttp.ClientSession() as session:
        tts = deepgram.TTS(**settings, http_session=session)  # type: ignore[arg-type]
        whole = await synthesized(tts, WHOLE)
        cut = await synthesized(tts, LONG, BARGE_IN_BYTES)
        whole_stream = await streamed(tts, WHOLE)
        cut_stream = await streamed(tts, LONG, BARGE_IN_BYTES)
        await tts.aclose()
    (out / "synthesize.pcm").write_bytes(whole)
    (out / "stream.pcm").write_bytes(whole_stream)
    return {"sample_rate": tts.sample_rate, "synthesize_bytes": len(whole), "stream_bytes": len(whole_stream),
            "synthesize_cut_bytes": len(cut), "stream_cut_bytes": len(cut_stream)}


if __name__ == "__main__":
    result = asyncio.run(main(json.loads(sys.argv[1]), Path(sys.argv[2])))
    print(json.dumps(result))
