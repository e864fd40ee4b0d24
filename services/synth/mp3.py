"""Gapless MP3 chunks: each sentence is a standalone MP3 that also concatenates into one stream.

A chunk is bare MPEG-2 Layer III frames (24 kHz mono, CBR): no ID3 tag, no Xing/Info/LAME
frame, and LAME's ancillary fill (it writes "LAME3.100" into spare bits) zeroed. So

* a browser's ``decodeAudioData`` decodes a chunk on its own;
* the byte concatenation of a cast's chunks is one valid MP3 stream;
* a decoder outputs exactly ``frames x 576`` samples for a chunk: without an info frame
  nobody trims the encoder delay and padding, so ``duration_ms = frames x 24`` is exact and
  chunks laid end to end at offsets sum(duration_ms) leave no gap.

The delay (~1105 samples of near-silence at the start) and the padding at the end stand in
for silence the model would have produced anyway: ``encode_chunk`` trims the model's trailing
silence first, and fades both ends over a few ms so that no seam clicks.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import av
import numpy as np
import numpy.typing as npt

from castlog import SAMPLE_RATE

DEFAULT_BITRATE = 48_000
# MPEG-2 Layer III: 576 samples per frame, exactly 24 ms at 24 kHz.
FRAME_SAMPLES = 576
FRAME_MS = FRAME_SAMPLES * 1000 // SAMPLE_RATE
FADE_MS = 5
# LAME's encoder delay plus the decoder's (576 + 529 samples): where a chunk's first input sample
# comes out of a decoder, since nothing trims it (word timings are shifted by it).
ENCODER_DELAY_SAMPLES = 1105
# Trailing silence: 10 ms windows quieter than this are silence; keep this much of it.
SILENCE_DBFS = -55.0
SILENCE_WINDOW_MS = 10
_WINDOW = SAMPLE_RATE * SILENCE_WINDOW_MS // 1000
TAIL_KEEP_MS = 50
# Leading silence kept when a chunk's lead is trimmed: the model starts every chunk with about
# 270 ms of silence, a sentence's pause at a seam, wrong inside a sentence and a delay before
# a cast's first word. With the tail kept and the encoder's delay, such a seam pauses ~130 ms.
LEAD_KEEP_MS = 30
# LAME's quality scale (``-q``): 0 slowest and best, 9 fastest; unset, LAME uses 3.
LAME_QUALITIES = range(10)
# Muxer options: no ID3v2/ID3v1 tag and no Xing/Info/LAME frame in front of the audio.
_MUXER_OPTIONS = {"id3v2_version": "0", "write_id3v1": "0", "write_xing": "0"}

# MPEG-2/2.5 Layer III header fields (ISO 13818-3).
_BITRATES_KBPS = (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160)
_SAMPLE_RATES = {2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}  # by version id
_SIDE_INFO_BYTES = 9  # MPEG-2 mono: one granule, one channel
_CRC_BYTES = 2

Pcm = npt.NDArray[np.float32]


@dataclass(frozen=True)
class EncodedChunk:
    data: bytes
    duration_ms: int  # what a decoder outputs for ``data`` alone: frames x 24 ms
    samples: int  # frames x 576


def encode_chunk(
    pcm: npt.ArrayLike, bitrate: int = DEFAULT_BITRATE, *, trim_lead: bool = False, quality: int | None = None
) -> EncodedChunk:
    """24 kHz mono float PCM -> one standalone, concatenable MP3 chunk (CBR ``bitrate``).

    The trailing silence is cut down to ``TAIL_KEEP_MS`` first; ``trim_lead``: the leading
    silence down to ``LEAD_KEEP_MS`` (a cast's first chunk, a chunk that continues a sentence).
    Both ends are faded. Empty input gives a few frames of silence (72 ms), so a chunk is never
    empty. ``quality``: LAME's ``-q`` (None: its default, 3); the bytes differ, the frames and
    the duration do not.
    """
    samples = np.clip(np.nan_to_num(np.asarray(pcm, dtype=np.float32).ravel()), -1.0, 1.0)
    samples = trim_trailing_silence(samples)
    if trim_lead:
        samples = trim_leading_silence(samples)
    samples = fade_edges(samples)
    if samples.size == 0:
        samples = np.zeros(FRAME_SAMPLES, dtype=np.float32)
    data = scrub_ancillary(_lame(samples, bitrate, quality))
    frames = len(frame_offsets(data))
    return EncodedChunk(data=data, duration_ms=frames * FRAME_MS, samples=frames * FRAME_SAMPLES)


def trim_trailing_silence(pcm: Pcm) -> Pcm:
    """Drop the model's trailing silence, keeping ``TAIL_KEEP_MS`` after the last sound."""
    if len(pcm) < _WINDOW:
        return pcm
    loud = _loud_windows(pcm)
    if loud.size == 0:
        return pcm[:0]
    return pcm[: (loud[-1] + 1) * _WINDOW + SAMPLE_RATE * TAIL_KEEP_MS // 1000]


def trim_leading_silence(pcm: Pcm) -> Pcm:
    """Drop the model's leading silence, keeping ``LEAD_KEEP_MS`` before the first sound."""
    loud = _loud_windows(pcm)
    if loud.size == 0:
        return pcm
    return pcm[max(0, loud[0] * _WINDOW - SAMPLE_RATE * LEAD_KEEP_MS // 1000) :]


def _loud_windows(pcm: Pcm) -> npt.NDArray[np.intp]:
    """The indices of the whole ``SILENCE_WINDOW_MS`` windows louder than ``SILENCE_DBFS``."""
    n = len(pcm) // _WINDOW
    rms = np.sqrt(np.mean(np.square(pcm[: n * _WINDOW].reshape(n, _WINDOW), dtype=np.float64), axis=1))
    return np.nonzero(rms > 10 ** (SILENCE_DBFS / 20))[0]


def fade_edges(pcm: Pcm, fade_ms: int = FADE_MS) -> Pcm:
    """Raised-cosine fade in and out, so a chunk starts and ends at zero."""
    n = min(len(pcm) // 2, SAMPLE_RATE * fade_ms // 1000)
    if n == 0:
        return pcm
    ramp = (0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, n, dtype=np.float64))).astype(np.float32)
    out: Pcm = pcm.copy()
    out[:n] *= ramp
    out[-n:] *= ramp[::-1]
    return out


def _lame(pcm: Pcm, bitrate: int, quality: int | None = None) -> bytes:
    if quality is not None and quality not in LAME_QUALITIES:
        raise ValueError(f"LAME's quality is 0..9, not {quality}")
    buffer = io.BytesIO()
    # libavcodec hands compression_level to lame_set_quality
    options = {} if quality is None else {"compression_level": str(quality)}
    with av.open(buffer, "w", format="mp3", options=_MUXER_OPTIONS) as container:
        stream = container.add_stream("libmp3lame", rate=SAMPLE_RATE, layout="mono", options=options)
        stream.bit_rate = bitrate  # a bit rate and no VBR option: libmp3lame encodes CBR
        frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="flt", layout="mono")
        frame.sample_rate = SAMPLE_RATE
        frame.pts = 0  # one frame holds the whole chunk: it starts at zero
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


def frame_offsets(data: bytes) -> list[tuple[int, int]]:
    """(offset, size) of every frame; the data must be bare MPEG-2(.5) Layer III mono frames."""
    frames = []
    pos = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError(f"truncated MP3 frame header at byte {pos}")
        header = int.from_bytes(data[pos : pos + 4], "big")
        version, layer = (header >> 19) & 3, (header >> 17) & 3
        bitrate_index, rate_index = (header >> 12) & 0xF, (header >> 10) & 3
        if header >> 21 != 0x7FF or version not in _SAMPLE_RATES or layer != 1 or (header >> 6) & 3 != 3:
            raise ValueError(f"not an MPEG-2 Layer III mono frame at byte {pos}")
        if not 0 < bitrate_index < len(_BITRATES_KBPS) or rate_index == 3:
            raise ValueError(f"bad bit rate or sample rate in the frame at byte {pos}")
        size = 72_000 * _BITRATES_KBPS[bitrate_index] // _SAMPLE_RATES[version][rate_index] + ((header >> 9) & 1)
        frames.append((pos, size))
        pos += size
    if pos != len(data):
        raise ValueError("the last MP3 frame is truncated")
    return frames


def scrub_ancillary(data: bytes) -> bytes:
    """Zero every main-data bit that no granule uses (LAME fills them with its name).

    Layer III main data flows through a bit reservoir: a frame's data starts
    ``main_data_begin`` bytes before its own slot, in the stream of all frames' slots laid end
    to end. Bits that no frame's ``part2_3_length`` covers are ancillary: decoders skip them.
    """
    out = bytearray(data)
    slots = []  # (start, end) of each frame's main-data slot in ``out``
    spans = []  # (first bit, bit count) of each frame's data in the joined slots
    joined = 0
    for pos, size in frame_offsets(data):
        side = pos + 4 + (0 if data[pos + 1] & 1 else _CRC_BYTES)
        main_data_begin = data[side]
        part2_3_length = (int.from_bytes(data[side + 1 : side + 4], "big") >> 11) & 0xFFF
        if main_data_begin > joined:
            raise ValueError(f"the frame at byte {pos} reaches back before the first frame")
        spans.append(((joined - main_data_begin) * 8, part2_3_length))
        slots.append((side + _SIDE_INFO_BYTES, pos + size))
        joined += pos + size - side - _SIDE_INFO_BYTES
    used = np.zeros(joined * 8, dtype=bool)
    for first, count in spans:
        used[first : first + count] = True
    main = np.frombuffer(b"".join(out[a:b] for a, b in slots), dtype=np.uint8) & np.packbits(used)
    offset = 0
    for start, end in slots:
        out[start:end] = main[offset : offset + end - start].tobytes()
        offset += end - start
    return bytes(out)
