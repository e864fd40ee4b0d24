"""MP3 bytes -> the PCM a listener's decoder makes of them: how the tests and the benchmarks check
synth's chunks (synth itself only encodes, ``synth.mp3``)."""

from __future__ import annotations

import io

import av
import numpy as np
import numpy.typing as npt


def decode_mp3(data: bytes) -> npt.NDArray[np.float32]:
    """MP3 bytes -> float32 PCM, every sample the decoder outputs (nothing trimmed)."""
    with av.open(io.BytesIO(data), "r", format="mp3") as container:
        frames = [frame.to_ndarray().reshape(-1) for frame in container.decode(audio=0)]
    if not frames:
        return np.zeros(0, dtype=np.float32)
    pcm: npt.NDArray[np.float32] = np.concatenate(frames).astype(np.float32, copy=False)
    return pcm
