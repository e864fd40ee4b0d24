"""The log's MP3 chunks as a telephony or agent client wants them: raw linear16, mu-law or A-law
at any rate from 8 to 48 kHz (PyAV's resampler and G.711 encoders).

One converter per turn of a ``/v1/speak`` session: the resampler keeps its filter state across
the turn's chunks (no click at a seam) and is flushed at the turn's end.
"""

from __future__ import annotations

import av
import numpy as np

from castlog import SAMPLE_RATE

from .formats import decode_chunk

# Deepgram's `encoding` names -> the G.711 codec (None: 16-bit little-endian PCM as it is).
ENCODINGS = {"linear16": None, "mulaw": "pcm_mulaw", "alaw": "pcm_alaw"}
MIN_RATE, MAX_RATE = 8_000, 48_000


class PhoneAudio:
    def __init__(self, encoding: str, rate: int, head: bytes = b"") -> None:
        self._head = head  # what goes out before the audio: a WAV container's header, if any
        self._resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
        self._pts = 0
        codec = ENCODINGS[encoding]
        self._codec: av.CodecContext | None = None
        if codec is not None:
            ctx = av.CodecContext.create(codec, "w")
            ctx.sample_rate, ctx.layout, ctx.format = rate, "mono", "s16"  # type: ignore[attr-defined]
            ctx.open()
            self._codec = ctx

    def feed(self, mp3: bytes) -> bytes:
        head, self._head = self._head, b""
        pcm = decode_chunk(mp3)
        if not pcm.size:
            return head
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(pcm.reshape(1, -1)), format="flt", layout="mono")
        frame.sample_rate, frame.pts = SAMPLE_RATE, self._pts
        self._pts += pcm.size
        return head + self._encode(self._resampler.resample(frame))

    def close(self) -> bytes:
        """What the resampler (and encoder) still hold: the end of the turn."""
        rest = self._head + self._encode(self._resampler.resample(None))
        if self._codec is not None:
            rest += b"".join(bytes(p) for p in self._codec.encode(None))  # type: ignore[attr-defined]
        return rest

    def _encode(self, frames: list[av.AudioFrame]) -> bytes:
        if self._codec is None:
            return b"".join(f.to_ndarray().astype("<i2").tobytes() for f in frames)
        return b"".join(bytes(p) for f in frames for p in self._codec.encode(f))  # type: ignore[attr-defined]
