"""Pipecat's own Deepgram TTS service against StreamTTS, in a real pipeline, as a voice agent runs it:
an LLM's answer word by word, the user talks over it (an interruption), then a second turn.

Run by tests/system/test_agent_clients.py with .venv-agents/bin/python (Pipecat and its
dependencies live there, never in the project's venv):

    pipecat_client.py ws|http SETTINGS_JSON OUT_DIR

SETTINGS_JSON holds the service's keyword arguments exactly as docs/integrations.md writes them
(base_url, api_key, voice); OUT_DIR receives turn1.pcm and turn2.pcm (16-bit mono at RATE). It
prints one JSON object: the bytes of each turn, those of turn 1 that came after the interruption,
and the errors the pipeline reported.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import aiohttp
from pipecat.frames.frames import (
    EndFrame,
    ErrorFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.deepgram.tts import DeepgramHttpTTSService, DeepgramTTSService
from pipecat.workers.runner import WorkerRunner

RATE = 16_000  # the pipeline's output rate, as a phone or WebRTC agent runs it
FIRST = " ".join(f"This is sentence number {n} of a long answer that the user will interrupt." for n in range(1, 9))
SECOND = "Sure, the second turn is short."
WAIT_S = 240.0  # the real model on a loaded CPU: generous, each wait ends on its signal


class Ears(FrameProcessor):
    """The pipeline's end: keeps the audio of the turn in hand and signals its first audio and its end."""

    def __init__(self) -> None:
        super().__init__()
        self.audio: dict[str | None, bytearray] = {}  # per audio context (a turn), in order
        self.turn = 1
        self.contexts: dict[str | None, int] = {}  # the turn each context's audio came in
        self.heard = asyncio.Event()
        self.stopped = asyncio.Event()
        self.errors: list[str] = []

    def turn_bytes(self, turn: int) -> int:
        return sum(len(a) for c, a in self.audio.items() if self.contexts[c] == turn)

    async def process_frame(self, frame, direction: FrameDirection) -> None:  # type: ignore[no-untyped-def]
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            self.contexts.setdefault(frame.context_id, self.turn)
            self.audio.setdefault(frame.context_id, bytearray()).extend(frame.audio)
            if self.turn_bytes(self.turn) >= RATE:  # half a second (16-bit): the answer is being spoken
                self.heard.set()
        elif isinstance(frame, TTSStoppedFrame) and self.turn_bytes(self.turn) and self.turn > 1:
            self.stopped.set()
        elif isinstance(frame, ErrorFrame):
            self.errors.append(str(frame.error))
        await self.push_frame(frame, direction)


async def answer(worker: PipelineWorker, text: str) -> None:
    """What an LLM service pushes: its answer word by word between start and end frames."""
    await worker.queue_frame(LLMFullResponseStartFrame())
    for word in text.split(" "):
        await worker.queue_frame(LLMTextFrame(word + " "))
    await worker.queue_frame(LLMFullResponseEndFrame())


async def main(kind: str, settings: dict[str, str], out: Path) -> dict[str, object]:
    async with aiohttp.ClientSession() as session:
        voice = settings.pop("voice")
        if kind == "ws":
            tts = DeepgramTTSService(**settings, settings=DeepgramTTSService.Settings(voice=voice))
        else:
            tts = DeepgramHttpTTSService(**settings, aiohttp_session=session,
                                         settings=DeepgramHttpTTSService.Settings(voice=voice))
        ears = Ears()
        worker = PipelineWorker(Pipeline([tts, ears]), params=PipelineParams(audio_out_sample_rate=RATE),
                                idle_timeout_secs=None)
        running = asyncio.ensure_future(WorkerRunner(handle_sigint=False).run(worker))
        await answer(worker, FIRST)
        await asyncio.wait_for(ears.heard.wait(), WAIT_S)
        await worker.queue_frame(InterruptionFrame())  # the user talks over the answer
        at_interruption, ears.turn = ears.turn_bytes(1), 2
        await answer(worker, SECOND)
        await asyncio.wait_for(ears.stopped.wait(), WAIT_S)
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(running, WAIT_S)
    for turn in (1, 2):
        audio = b"".join(a for c, a in ears.audio.items() if ears.contexts[c] == turn)
        (out / f"turn{turn}.pcm").write_bytes(audio)
    return {"turn1_bytes": at_interruption, "turn1_after": ears.turn_bytes(1) - at_interruption,
            "turn2_bytes": ears.turn_bytes(2), "errors": ears.errors}


if __name__ == "__main__":
    result = asyncio.run(main(sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])))
    print(json.dumps(result))
