"""The audio track of a WebRTC session: the cast's PCM, 20 ms frames in real time, silence between.

The session pushes each sentence's PCM (s16le mono 24 kHz) as it comes; the sender (aiortc's
RTCRtpSender, which Opus-encodes at 48 kHz) takes a frame every 20 ms, paced here by the clock.
Sentences follow each other sample for sample; while no audio is queued the frames are silence,
so the track never ends between sentences. A push waits while more than ``buffer_ms`` is queued:
a session holds at most that plus one sentence, and the audio track reads on only as the audio plays.
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import time

from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError
from av import AudioFrame

from castlog import SAMPLE_RATE

FRAME_MS = 20
FRAME_SAMPLES = SAMPLE_RATE * FRAME_MS // 1000
FRAME_BYTES = FRAME_SAMPLES * 2  # s16 mono
TIME_BASE = fractions.Fraction(1, SAMPLE_RATE)


class SpeechTrack(MediaStreamTrack):
    kind = "audio"

    def __init__(self, buffer_ms: int) -> None:
        super().__init__()
        self._buffer_bytes = buffer_ms * SAMPLE_RATE // 1000 * 2
        self._pcm = bytearray()  # queued, not yet sent
        self._room = asyncio.Event()  # set when a frame was taken (or the track ended)
        self._empty = asyncio.Event()  # set while nothing is queued
        self._empty.set()
        self.cleared = False  # cancelled: silence from now on
        self._started: float | None = None  # the clock when the first frame went
        self._pts = 0  # samples sent

    def queued_ms(self) -> float:
        return len(self._pcm) / 2 / SAMPLE_RATE * 1000

    async def push(self, pcm: bytes) -> None:
        """Queue ``pcm`` after what is queued; wait while more than the buffer is queued.
        ConnectionError once the track has ended (the peer is gone)."""
        while len(self._pcm) > self._buffer_bytes and self.readyState == "live" and not self.cleared:
            self._room.clear()
            await self._room.wait()
        if self.readyState != "live":
            raise ConnectionError("the peer connection is closed")
        if self.cleared:  # a cancel came while this waited: it stays silent
            return
        self._pcm += pcm
        if self._pcm:
            self._empty.clear()

    def clear(self) -> None:
        """Drop what is queued and whatever is pushed from now on: the audio stops at the next
        frame, for good (a cancel)."""
        self.cleared = True
        self._pcm.clear()
        self._empty.set()
        self._room.set()

    async def played(self, timeout_s: float) -> None:
        """Until everything queued has been sent (or ``timeout_s``: a peer that stopped reading)."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._empty.wait(), timeout_s)

    def stop(self) -> None:
        super().stop()
        self._room.set()  # a push waiting for room learns that the track ended

    async def recv(self) -> AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._started is None:
            self._started = time.monotonic()
        else:
            self._pts += FRAME_SAMPLES
            await asyncio.sleep(self._started + self._pts / SAMPLE_RATE - time.monotonic())
        chunk = bytes(self._pcm[:FRAME_BYTES])
        del self._pcm[:FRAME_BYTES]
        if not self._pcm:
            self._empty.set()
        self._room.set()
        frame = AudioFrame(format="s16", layout="mono", samples=FRAME_SAMPLES)
        frame.planes[0].update(chunk.ljust(FRAME_BYTES, b"\0"))
        frame.pts, frame.sample_rate, frame.time_base = self._pts, SAMPLE_RATE, TIME_BASE
        return frame
