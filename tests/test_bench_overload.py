"""bench_overload's two views of one listener (#37): the log's stamps and the client's bytes,
counted by one rule, agree when edge delivers every record equally late, and differ by exactly
how much later than the first audio a record came."""

from __future__ import annotations

import numpy as np
import pytest
from bench_overload import Heard, compare, heard_records, stall_s

from castlog import SAMPLE_RATE, Audio, Entry
from synth.mp3 import EncodedChunk, encode_chunk

T0 = 1_800_000_000.0  # a wall clock, in seconds


def tone(seconds: float) -> EncodedChunk:
    t = np.arange(int(seconds * SAMPLE_RATE), dtype=np.float32) / SAMPLE_RATE
    return encode_chunk(0.3 * np.sin(2 * np.pi * 220 * t))


def record(seq: int, i: int, chunk: EncodedChunk, at_s: float) -> Entry:
    audio = Audio(i=i, t=f"chunk {i}", d=chunk.duration_ms, o=0, body=chunk.data)
    return Entry(seq, audio, ts=round(1000 * at_s))


def received(records: list[Entry], delays: list[float]) -> Heard:
    """A client that got each record's body ``delay`` after its stamp, in two pieces 10 ms apart
    (a frame cut between them)."""
    heard = Heard(cast_id="c", sent=T0)
    for e, delay in zip(records, delays):
        assert isinstance(e.record, Audio)
        body, cut = e.record.body, len(e.record.body) // 2 + 7
        for piece, extra in ((body[:cut], 0.0), (body[cut:], 0.01)):
            heard.arrivals.append((e.ts / 1000 + delay + extra, len(piece)))
            heard.data += piece
    return heard


def test_a_player_waits_for_what_is_not_there_yet_and_only_that() -> None:
    assert stall_s(0.0, [(0.0, 1.0), (1.5, 1.0), (2.5, 1.0)]) == pytest.approx(0.5)
    assert stall_s(0.0, [(0.0, 1.0), (0.9, 1.0), (1.9, 2.0)]) == 0.0
    assert stall_s(0.0, [(0.0, 0.5), (2.0, 0.5), (4.0, 0.5)]) == pytest.approx(1.5 + 1.5)


def test_the_client_hears_the_log_when_every_record_is_equally_late() -> None:
    chunks = [tone(1.0), tone(2.0), tone(1.5)]
    d0, d1 = (c.duration_ms / 1000 for c in chunks[:2])
    # the second chunk is stamped 0.4 s after the first ran out, the third well ahead
    records = [record(1, 0, chunks[0], T0), record(2, 1, chunks[1], T0 + d0 + 0.4),
               record(3, 2, chunks[2], T0 + d0 + 0.4 + d1 - 0.5)]
    row = compare(received(records, [0.03, 0.03, 0.03]), records)
    assert row["same_bytes"] and row["records"] == 3
    assert row["client_audio_s"] == row["audio_s"] == sum(c.duration_ms for c in chunks) / 1000
    assert row["stall_s"] == pytest.approx(0.4, abs=0.002)
    assert row["client_stall_s"] == pytest.approx(row["stall_s"], abs=0.002)
    assert row["delivery_first_ms"] == pytest.approx(30 + 10, abs=1)


def test_a_record_delivered_later_than_the_first_is_stall_only_the_client_hears() -> None:
    chunks = [tone(1.0), tone(1.0)]
    records = [record(1, 0, chunks[0], T0), record(2, 1, chunks[1], T0 + 0.5)]  # well ahead: no stall in the log
    heard = received(records, [0.02, 1.5])  # edge held the second back 1.5 s
    row = compare(heard, records)
    assert row["stall_s"] == 0.0
    # the player started at the first byte (0.02 s), ran out at 0.02 + d0, the next came at 2.0 s
    assert row["client_stall_s"] == pytest.approx(2.0 - 0.02 - chunks[0].duration_ms / 1000, abs=0.002)
    assert row["stall_difference_s"] == row["client_stall_s"]
    assert row["delivery_max_ms"] == pytest.approx(1510, abs=1)


def test_a_retried_sentence_is_heard_once() -> None:
    chunk = tone(0.5)
    entries = [record(1, 0, chunk, T0), record(2, 1, chunk, T0 + 0.4), record(3, 1, chunk, T0 + 0.6),
               record(4, 2, chunk, T0 + 0.8)]
    assert [e.seq_num for e in heard_records(entries)] == [1, 2, 4]
