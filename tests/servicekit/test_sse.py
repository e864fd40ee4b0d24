"""servicekit.sse, the one SSE writer: what a client that reads by the spec gets back is what was
written, whatever line breaks the payload holds, and each route's bytes are the ones it had."""

from __future__ import annotations

import pytest

from servicekit import sse

PAYLOADS = [b"", b"one line", b" leading space", b"a\nb", b"a\r\nb\rc\n", b"\n\n", b"event: control\r\ndata: {}\r\n\r\n",
            "\u00e9t\u00e9 \u2028 not a break".encode()]


def parse(stream: bytes) -> list[tuple[str | None, str, str]]:
    """(id, event, data) of each event, as the WHATWG spec's EventSource parser reads them."""
    events, data, event, last_id = [], [], "message", None
    for line in stream.decode().replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line:
            if data:
                events.append((last_id, event, "\n".join(data)))
            data, event = [], "message"
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id":
            last_id = value
    return events


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_spec_reader_gets_every_payload_back_as_one_event(payload: bytes) -> None:
    written = sse.frame(payload, event="audio", event_id=7) + sse.comment("heartbeat")
    lines = payload.replace(b"\r\n", b"\n").replace(b"\r", b"\n").decode()
    assert parse(written) == [("7", "audio", lines)]


def test_the_tight_data_field_reads_back_alike_where_no_line_starts_with_a_space() -> None:
    for payload in PAYLOADS:
        tight = sse.frame(payload, event="data", field=sse.DATA_TIGHT)
        assert tight.count(b"\ndata:") == payload.replace(b"\r\n", b"\n").replace(b"\r", b"\n").count(b"\n") + 1
        if b" " not in payload:
            assert parse(tight) == parse(sse.frame(payload, event="data"))


def test_each_routes_bytes_are_kept() -> None:
    """edge's record events, Durable Streams' multi-line events, /v1's OpenAI events, edge's comments."""
    assert sse.frame(b'{"seq_num":3}', event="audio", event_id=3) == b'id: 3\nevent: audio\ndata: {"seq_num":3}\n\n'
    assert sse.frame(b"line1\r\nline2\n", event="data", field=sse.DATA_TIGHT) == (
        b"event: data\ndata:line1\ndata:line2\ndata:\n\n")
    assert sse.frame(b'{"type":"speech.audio.done"}') == b'data: {"type":"speech.audio.done"}\n\n'
    assert sse.comment("heartbeat") + sse.retry(2_000) == b": heartbeat\n\nretry: 2000\n\n"
    assert sse.HEADERS["Content-Type"] == "text/event-stream"  # exactly: Durable Streams' suite compares it
