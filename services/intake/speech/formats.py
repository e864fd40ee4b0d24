"""The log's MP3 chunks -> the format a `/v1/audio/speech` client asked for, as they arrive.

Every audio record is a standalone MP3 (bare frames, no info frame): decoded on its own it
gives exactly ``frames x 576`` samples and nothing is trimmed, so the PCM of a cast is the
concatenation of its chunks' PCM, sample for sample. ``pcm``, ``wav`` and ``flac`` carry exactly
those samples (no gap, delay or padding at a seam); ``opus`` and ``aac`` run one encoder over the
whole response, so their only delay is their codec's priming at the very start.

Deepgram's raw encodings (``linear16``, ``mulaw``, ``alaw``: ``/v1/speak``'s) come at any rate from
8 to 48 kHz: the encoder resamples, keeping its filter state across a turn's chunks (no click at a
seam), and flushes it at the turn's end.

A converter is fed one chunk at a time and returns the bytes ready to send; ``close`` returns
the rest. Converters are synchronous and take milliseconds per chunk (``bench/bench_speech.py``).
"""

from __future__ import annotations

import io
import struct
from typing import Protocol

import av
import numpy as np
import numpy.typing as npt

from castlog import SAMPLE_RATE

# MIME types as OpenAI answers them.
CONTENT_TYPES = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
FORMATS = tuple(CONTENT_TYPES)
# (muxer, codec, bit rate) of the formats PyAV encodes; bit rates as OpenAI's are, for speech. MP3
# made louder or softer (``gain``) or at another bit rate is encoded again, by default at the log's own.
_ENCODED = {"opus": ("ogg", "libopus", 32_000), "aac": ("adts", "aac", 64_000), "flac": ("flac", "flac", 0),
            "mp3": ("mp3", "libmp3lame", 64_000), "linear16": ("s16le", "pcm_s16le", 0),
            "mulaw": ("mulaw", "pcm_mulaw", 0), "alaw": ("alaw", "pcm_alaw", 0)}
# Deepgram's raw encodings (16-bit little-endian PCM, G.711) and the rates they come at.
PHONE_ENCODINGS = ("linear16", "mulaw", "alaw")
MIN_RATE, MAX_RATE = 8_000, 48_000
# Ogg pages are cut every this many microseconds (default 1 s): a page is what a client gets at once.
OGG_PAGE_US = 100_000
# A WAV header's sizes when the length is not known yet: the largest value, as ffmpeg streams WAV.
UNKNOWN_SIZE = 0xFFFFFFFF
# WAVE format tags: linear PCM, and the G.711 codecs.
WAV_TAGS = {"linear16": 1, "alaw": 6, "mulaw": 7}

Pcm = npt.NDArray[np.float32]


class Converter(Protocol):
    def feed(self, mp3: bytes) -> bytes: ...

    def close(self) -> bytes: ...


def converter(fmt: str, gain: float = 1.0, bit_rate: int | None = None, rate: int = SAMPLE_RATE,
              head: bytes = b"") -> Converter:
    """A fresh converter to ``fmt`` (one of ``FORMATS`` or ``PHONE_ENCODINGS``) for one response;
    ``gain`` scales the samples (Kokoro-FastAPI's ``volume_multiplier``), clipped; ``bit_rate``
    (Deepgram's, for mp3, opus and aac) replaces the format's own; a phone encoding comes at
    ``rate``, after ``head`` (a WAV container's header, if any)."""
    if fmt == "mp3" and gain == 1.0 and bit_rate is None:
        return Passthrough()
    if fmt == "pcm":
        return PcmConverter(gain)
    if fmt == "wav":
        return PcmConverter(gain, wav=True)
    if fmt in _ENCODED:
        muxer, codec, default = _ENCODED[fmt]
        return EncodedConverter(muxer, codec, bit_rate or default, gain=gain, rate=rate, head=head)
    raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")


def decode_chunk(mp3: bytes) -> Pcm:
    """One standalone MP3 chunk -> float32 PCM, every sample the decoder outputs."""
    with av.open(io.BytesIO(mp3), "r", format="mp3") as container:
        frames = [frame.to_ndarray().reshape(-1) for frame in container.decode(audio=0)]
    if not frames:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate(frames).astype(np.float32, copy=False)


def to_s16le(pcm: Pcm) -> bytes:
    return (np.clip(pcm, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def wav_header(sample_rate: int = SAMPLE_RATE, data_bytes: int = UNKNOWN_SIZE, encoding: str = "linear16") -> bytes:
    """A 44-byte RIFF/WAVE header for mono s16le (``linear16``) or G.711 (``alaw``, ``mulaw``: 8
    bits a sample); sizes unknown (a stream) by default."""
    riff = UNKNOWN_SIZE if data_bytes == UNKNOWN_SIZE else 36 + data_bytes
    width = 2 if encoding == "linear16" else 1
    fmt = struct.pack("<HHIIHH", WAV_TAGS[encoding], 1, sample_rate, sample_rate * width, width, 8 * width)
    return b"RIFF" + struct.pack("<I", riff) + b"WAVEfmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack(
        "<I", data_bytes
    )


class Passthrough:
    def feed(self, mp3: bytes) -> bytes:
        return mp3

    def close(self) -> bytes:
        return b""


def _louder(pcm: Pcm, gain: float) -> Pcm:
    return pcm if gain == 1.0 else np.clip(pcm * np.float32(gain), -1.0, 1.0)


class PcmConverter:
    def __init__(self, gain: float = 1.0, wav: bool = False) -> None:
        self._gain = gain
        self._head = wav_header() if wav else b""  # a WAV stream's header (sizes unknown), before the samples

    def feed(self, mp3: bytes) -> bytes:
        head, self._head = self._head, b""
        return head + to_s16le(_louder(decode_chunk(mp3), self._gain))

    def close(self) -> bytes:
        return wav_header(data_bytes=0) if self._head else b""  # a WAV that got no samples: a header that says so


class _Sink:
    """A write-only file for the muxer: no seek, so muxers stream (FLAC's header stays as first
    written); what was written since the last ``take`` is handed out and forgotten."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out = b"".join(self._parts)
        self._parts.clear()
        return out


class EncodedConverter:
    """Decode each chunk and feed one encoder and muxer for the whole response."""

    def __init__(self, muxer: str, codec: str, bit_rate: int, gain: float = 1.0, rate: int = SAMPLE_RATE,
                 head: bytes = b"") -> None:
        self._gain = gain
        self._sink = _Sink()
        self._sink.write(head)  # what goes out before the audio
        options = {"flush_packets": "1"}
        if muxer == "ogg":
            options["page_duration"] = str(OGG_PAGE_US)
        self._container = av.open(self._sink, "w", format=muxer, options=options)
        stream = self._container.add_stream(codec, rate=rate, layout="mono")  # PyAV resamples to it
        assert isinstance(stream, av.AudioStream)
        self._stream = stream
        if bit_rate:
            self._stream.bit_rate = bit_rate
        self._pts = 0
        self._closed = False
        # AAC's first packet holds only the encoder's priming (1024 samples of silence, which
        # ADTS cannot tell a decoder to skip): dropping it keeps the duration the MP3's.
        self._skip = 1 if codec == "aac" else 0
        self._lossless = codec == "flac"

    def feed(self, mp3: bytes) -> bytes:
        pcm = _louder(decode_chunk(mp3), self._gain)
        if pcm.size:
            frame = self._frame(pcm)
            frame.sample_rate = SAMPLE_RATE
            frame.pts = self._pts
            self._pts += pcm.size
            self._mux(self._stream.encode(frame))
        return self._sink.take()

    def _frame(self, pcm: Pcm) -> av.AudioFrame:
        if self._lossless:  # the very samples `pcm` and `wav` carry, not a second rounding of them
            s16 = np.frombuffer(to_s16le(pcm), dtype="<i2").reshape(1, -1)
            return av.AudioFrame.from_ndarray(s16, format="s16", layout="mono")
        return av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="flt", layout="mono")

    def _mux(self, packets: list[av.Packet]) -> None:
        for packet in packets:
            if self._skip:
                self._skip -= 1
                continue
            self._container.mux(packet)

    def close(self) -> bytes:
        if not self._closed:
            self._closed = True
            self._mux(self._stream.encode(None))
            self._container.close()
        return self._sink.take()
