"""MP3 chunks to raw PCM for live clients that ask for ``"format": "pcm"``: s16le, mono, 24 kHz.

Decoding needs PyAV, which intake's base install lacks (synth's image has it): without it the
live session refuses ``pcm`` and offers MP3. A sentence decodes in about a millisecond; it runs
in a thread all the same, off the event loop.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io

from castlog import SAMPLE_RATE  # the MP3 chunks' rate


def available() -> bool:
    return importlib.util.find_spec("av") is not None


def mp3_to_pcm(data: bytes) -> bytes:
    import av  # optional: see available()

    out = bytearray()
    resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
    with av.open(io.BytesIO(data), "r", format="mp3") as container:
        for frame in container.decode(audio=0):
            for piece in resampler.resample(frame):
                out += bytes(piece.planes[0])[: piece.samples * 2]
    for piece in resampler.resample(None):
        out += bytes(piece.planes[0])[: piece.samples * 2]
    return bytes(out)


async def decode(data: bytes) -> bytes:
    return await asyncio.get_running_loop().run_in_executor(None, mp3_to_pcm, data)
