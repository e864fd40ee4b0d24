from __future__ import annotations

import logging

import msgspec
import pytest

from castlog import Audio, Entry, Eos, Error, Meta, Start, from_public, public_dict
from castlog.records import Record, decode_entry, encode_fields, kind_of

SAMPLES: list[Record] = [
    Meta(title="T", voice="af_heart", chars=12, sentences=2, created_at=1_700_000_000_000),
    Start(attempt=2, resume_from=1, at=1_700_000_000_500),
    Audio(i=0, t="Hello there.", d=1200, o=0, body=b"\xff\xf3mp3"),
    Eos(sentences=2, audio_ms=2400, attempts=2),
    Error(reason="boom", attempts=3),
]


@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: kind_of(r))
def test_record_round_trips_through_entry_fields(record: Record) -> None:
    e, h, b = encode_fields(record)
    entry = decode_entry(b"0-5", {b"e": e, b"h": h, b"b": b, b"ts": b"123"})
    assert entry == Entry(4, record, 123)


def test_tags_are_explicit_strings_in_stored_headers() -> None:
    e, h, b = encode_fields(SAMPLES[2])
    assert e == b"audio"
    headers = msgspec.json.decode(h)
    assert headers == {"e": "audio", "i": 0, "t": "Hello there.", "d": 1200, "o": 0}
    assert b == b"\xff\xf3mp3"  # the body lives in b, never inside h


@pytest.mark.rule("unknown-kind-skipped")
def test_unknown_kind_is_skipped_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    fields = {b"e": b"glossary", b"h": b'{"e":"glossary","n":1}'}
    with caplog.at_level(logging.WARNING, logger="castlog.records"):
        assert decode_entry(b"0-1", fields) is None
        assert decode_entry(b"0-2", fields) is None
    assert sum("glossary" in r.message for r in caplog.records) == 1


def test_newer_headers_with_extra_fields_still_decode() -> None:
    fields = {b"e": b"eos", b"h": b'{"e":"eos","sentences":1,"audio_ms":5,"attempts":1,"future":true}'}
    entry = decode_entry(b"0-3", fields)
    assert entry is not None and entry.record == Eos(sentences=1, audio_ms=5, attempts=1)


PUBLIC_SAMPLES: list[Record] = [
    *SAMPLES,
    Meta(title="Live", voice="jf_alpha", chars=0, sentences=0, created_at=1, live=True, speed=1.25),
    Audio(i=3, t="Words.", d=800, o=5000, n=9, w=(("Words", 0, 620),), body=b"\xff\xfb\x90"),
]


@pytest.mark.parametrize("record", PUBLIC_SAMPLES, ids=lambda r: kind_of(r))
def test_record_round_trips_through_its_public_json(record: Record) -> None:
    entry = Entry(7, record, 1_700_000_000_123)
    wire = msgspec.json.decode(msgspec.json.encode(public_dict(entry)))
    assert wire["kind"] == kind_of(record) and "e" not in wire["headers"] and "body" not in wire["headers"]
    assert from_public(wire) == entry


@pytest.mark.rule("unknown-kind-skipped")
def test_public_json_leaves_defaults_out_and_skips_unknown_kinds() -> None:
    wire = public_dict(Entry(0, Audio(i=0, t="A.", d=1, o=0, body=b"x")))
    assert wire["headers"] == {"i": 0, "t": "A.", "d": 1, "o": 0}  # n, w at their defaults: absent
    assert from_public({**wire, "kind": "caption"}) is None  # a newer kind: skipped, not an error
    with pytest.raises(msgspec.ValidationError):
        from_public({**wire, "headers": {"i": "zero"}})  # a known kind that does not fit it
