"""Server-Sent Events on the wire: the one frame writer and the one header set of every SSE
response (edge's cast events, Durable Streams' ``live=sse``, intake's ``/v1/audio/speech`` with
``stream_format=sse``). Bytes in, bytes out: a frame is built once and written as it is.
"""

from __future__ import annotations

# The type without a charset: an event stream is always UTF-8 (the spec's ``charset`` parameter
# "serves no purpose"), and Durable Streams' conformance suite wants exactly ``text/event-stream``.
# No-buffering: nginx and friends pass each event through at once.
HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

# A client strips one space after a field's colon, so ``data: `` keeps every line as written.
DATA = b"data: "
# Durable Streams' data lines have no space (its conformance suite reads ``data:line1``).
DATA_TIGHT = b"data:"


def frame(data: bytes, *, event: str | None = None, event_id: int | None = None, field: bytes = DATA) -> bytes:
    """One event: ``id:`` and ``event:`` when given, then ``data`` as one ``field`` line per line
    (CRLF, CR and LF each end a line in SSE: a payload's own breaks can neither end the event nor
    forge a field), then the blank line that dispatches it. JSON is one line: nothing to split."""
    head = b"" if event_id is None else b"id: %d\n" % event_id
    if event is not None:
        head += b"event: " + event.encode() + b"\n"
    if b"\n" in data or b"\r" in data:
        data = (b"\n" + field).join(data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"))
    return b"".join((head, field, data, b"\n\n"))  # one copy of the payload


def comment(text: str) -> bytes:
    """A comment (a heartbeat, a goodbye): clients skip it, and it keeps an idle stream alive."""
    return b": %s\n\n" % text.encode()


def retry(ms: int) -> bytes:
    """How long EventSource waits before it reconnects a dropped stream."""
    return b"retry: %d\n\n" % ms
