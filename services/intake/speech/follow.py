"""A cast's audio records as intake's shared tail brings them (``fanout.Tail``: one blocked
read per process, however many listeners): the one loop a ``/v1/audio/speech`` response, streamed
(``stream.py``) or whole (``whole.py``), a ``/v1/speak`` turn (``speak.py``) and a Wyoming
connection (``wyomingserver.py``) follow a cast with.

An ``error`` record at or before ``settled`` is history (a failure the claim re-enqueued), and so
is one a later attempt follows; each sentence comes once, however many attempts wrote it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from castlog import Audio, Eos, Error, LogReader, SubmitResult
from fanout import Tail

from ..validate import Refusal


class CastFailed(Refusal):
    """The cast's last attempt failed: ``reason`` is its ``error`` record's (a request that has
    sent nothing yet is answered 500)."""

    def __init__(self, reason: str) -> None:
        super().__init__(500, "synthesis_failed",
                         f"the synthesis failed ({reason}); send the same request again to retry it")
        self.reason = reason


class TailClosed(Refusal):
    """intake is stopping: the shared tail closed before the cast's end (503, if nothing was sent)."""

    def __init__(self) -> None:
        super().__init__(503, "shutting_down", "intake is stopping; send the same request again")


async def settled_at(reader: LogReader, cast_id: str, result: SubmitResult) -> int:
    """The ``settled`` of a claimed cast: a log that ended in ``error`` before this request was
    re-enqueued by its submit, so that error is history, not this request's answer."""
    last = None if result == "new" else await reader.last(cast_id)
    return last.seq_num if last is not None and isinstance(last.record, Error) else -1


async def cast_audio(tail: Tail, reader: LogReader, cast_id: str, settled: int, kind: str) -> AsyncGenerator[Audio, None]:
    """Each sentence's audio record once, in order, until ``eos``; raises ``CastFailed`` or
    ``TailClosed``. Iterate it under ``contextlib.aclosing`` so the listener goes at once."""
    sent, seq = -1, 0
    while True:  # a listener ends at an `error`; one that is history is followed past
        async with tail.listen(cast_id, seq, kind) as listener:
            while not listener.done:
                item = await listener.next(None)
                if item is None:
                    break
                entry, record = item.entry, item.entry.record
                seq = entry.seq_num + 1
                if isinstance(record, Audio) and record.i > sent:
                    sent = record.i
                    yield record
                elif isinstance(record, Eos):
                    return
                elif isinstance(record, Error) and entry.seq_num > settled:
                    if await reader.tail(cast_id) > seq:
                        continue  # a later attempt follows it: history too
                    raise CastFailed(record.reason)
            if listener.closed:
                raise TailClosed
