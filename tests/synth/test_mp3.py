"""Gapless MP3 chunks, encoded and decoded for real (PyAV's libmp3lame and FFmpeg decoder)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import av.logging
import numpy as np
import pytest
from mp3decode import decode_mp3

from castlog import SAMPLE_RATE
from synth.mp3 import (
    FRAME_MS,
    FRAME_SAMPLES,
    EncodedChunk,
    _lame,
    encode_chunk,
    frame_offsets,
    scrub_ancillary,
    trim_leading_silence,
    trim_trailing_silence,
)

pytestmark = pytest.mark.model  # the chunks are real model speech

MARKERS = (b"ID3", b"TAG", b"Xing", b"Info", b"LAME", b"Lavf", b"Lavc")
CBR_48K_FRAME_BYTES = 144  # 72 x 48 kbps / 24 kHz


@pytest.fixture(scope="module")
def chunks(speech: list[np.ndarray]) -> list[EncodedChunk]:
    return [encode_chunk(pcm) for pcm in speech]


def test_each_chunk_decodes_alone_to_exactly_its_duration(chunks: list[EncodedChunk]) -> None:
    for chunk in chunks:
        decoded = decode_mp3(chunk.data)
        assert len(decoded) == chunk.samples == chunk.duration_ms * SAMPLE_RATE // 1000
        assert chunk.duration_ms % FRAME_MS == 0
        assert np.abs(decoded).max() > 0.05


def test_chunks_carry_no_tags_info_frame_or_encoder_name(chunks: list[EncodedChunk]) -> None:
    for chunk in chunks:
        assert chunk.data[:2] == b"\xff\xf3"  # the first byte is an MPEG-2 Layer III frame
        for marker in MARKERS:
            assert marker not in chunk.data, marker


def test_chunks_are_constant_bit_rate_frames(chunks: list[EncodedChunk]) -> None:
    for chunk in chunks:
        sizes = {size for _, size in frame_offsets(chunk.data)}
        assert sizes == {CBR_48K_FRAME_BYTES}
        assert len(chunk.data) == chunk.samples // FRAME_SAMPLES * CBR_48K_FRAME_BYTES


@pytest.fixture
def ffmpeg_logs() -> Iterator[list[tuple[int, str, str]]]:
    """FFmpeg's own log lines (PyAV keeps them off by default)."""
    level = av.logging.get_level()
    av.logging.set_level(av.logging.WARNING)
    try:
        with av.logging.Capture() as logs:
            yield logs
    finally:
        av.logging.set_level(level)


def test_concatenated_chunks_decode_as_one_stream(
    chunks: list[EncodedChunk], ffmpeg_logs: list[tuple[int, str, str]]
) -> None:
    joined = b"".join(chunk.data for chunk in chunks)
    decoded = decode_mp3(joined)
    # decode_mp3 raises on a bad frame; FFmpeg would also log errors it recovered from.
    assert not [line for line in ffmpeg_logs if line[0] <= av.logging.ERROR], ffmpeg_logs
    assert abs(len(decoded) - sum(chunk.samples for chunk in chunks)) <= FRAME_SAMPLES
    # Laid end to end, each chunk's audio sits where the timeline says: at sum(d).
    offset = 0
    for chunk in chunks:
        alone = decode_mp3(chunk.data)
        window = slice(offset + FRAME_SAMPLES, offset + len(alone) - FRAME_SAMPLES)
        assert np.abs(decoded[window] - alone[FRAME_SAMPLES:-FRAME_SAMPLES]).max() < 1e-3
        offset += chunk.samples


def test_seam_between_chunks_does_not_click(chunks: list[EncodedChunk]) -> None:
    decoded = decode_mp3(b"".join(chunk.data for chunk in chunks))
    jumps = np.abs(np.diff(decoded))
    within_speech = float(np.percentile(jumps, 99))
    seam = 0
    for chunk in chunks[:-1]:
        seam += chunk.samples
        around = jumps[seam - FRAME_SAMPLES : seam + FRAME_SAMPLES]
        assert around.max() < within_speech, (around.max(), within_speech)


def test_scrubbing_the_encoder_name_leaves_the_audio_bit_exact(speech: list[np.ndarray]) -> None:
    raw = _lame(speech[0], 48_000)
    scrubbed = scrub_ancillary(raw)
    assert b"LAME" in raw and b"LAME" not in scrubbed
    assert np.array_equal(decode_mp3(raw), decode_mp3(scrubbed))


def test_trailing_silence_is_trimmed_but_speech_is_kept(speech: list[np.ndarray]) -> None:
    pcm = speech[1]
    trimmed = trim_trailing_silence(pcm)
    assert len(trimmed) < len(pcm) - SAMPLE_RATE // 10  # the model leaves hundreds of ms
    assert np.abs(pcm[len(trimmed):]).max() < 0.01
    padded = np.concatenate([pcm, np.zeros(SAMPLE_RATE, dtype=np.float32)])
    assert len(encode_chunk(padded).data) == len(encode_chunk(pcm).data)


def test_leading_silence_is_trimmed_on_request_but_speech_is_kept(speech: list[np.ndarray]) -> None:
    pcm = speech[1]
    trimmed = trim_leading_silence(pcm)
    cut = len(pcm) - len(trimmed)
    assert cut > SAMPLE_RATE // 10  # the model starts every chunk with hundreds of ms of silence
    assert np.array_equal(trimmed, pcm[cut:]) and np.abs(pcm[:cut]).max() < 0.01
    assert encode_chunk(pcm, trim_lead=True).duration_ms <= encode_chunk(pcm).duration_ms - 100


def test_empty_pcm_gives_one_short_silent_chunk() -> None:
    chunk = encode_chunk(np.zeros(0, dtype=np.float32))
    decoded = decode_mp3(chunk.data)
    assert 0 < chunk.duration_ms <= 4 * FRAME_MS and len(decoded) == chunk.samples
    assert np.abs(decoded).max() < 1e-3


def test_out_of_range_samples_are_clipped_not_wrapped() -> None:
    loud = 3.0 * np.sin(np.linspace(0, 200 * np.pi, SAMPLE_RATE)).astype(np.float32)
    assert np.abs(decode_mp3(encode_chunk(loud).data)).max() < 1.2


def test_encoding_is_much_faster_than_real_time(speech: list[np.ndarray]) -> None:
    started = time.perf_counter()
    encoded = [encode_chunk(pcm) for pcm in speech]
    elapsed = time.perf_counter() - started
    audio_s = sum(chunk.duration_ms for chunk in encoded) / 1000
    print(f"mp3 encode: {elapsed / len(encoded) * 1000:.1f} ms per chunk, {elapsed / audio_s:.3f}x real time")
    assert elapsed / audio_s < 0.2


def test_a_faster_lame_quality_gives_the_same_frames_and_duration(speech: list[np.ndarray]) -> None:
    """A first chunk's quality (SYNTH_FIRST_MP3_QUALITY) changes LAME's effort, never the
    chunk's shape: same frames, same duration, standalone and scrubbed as ever."""
    pcm = speech[1]
    default, fast = encode_chunk(pcm), encode_chunk(pcm, quality=6)
    assert encode_chunk(pcm, quality=3).data == default.data  # LAME's own default
    assert fast.data != default.data
    assert (fast.duration_ms, fast.samples, len(fast.data)) == (default.duration_ms, default.samples, len(default.data))
    assert len(decode_mp3(fast.data)) == fast.samples
    assert not any(marker in fast.data for marker in MARKERS)
    with pytest.raises(ValueError, match="0..9"):
        encode_chunk(pcm, quality=10)
