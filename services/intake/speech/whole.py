"""``"stream": false`` (Kokoro-FastAPI's): the cast's whole audio as one file with a Content-Length.

The cast is followed to its end as ``stream.py`` follows it, each chunk converted as it comes;
the answer goes out once the cast is done. Bounded: a cast is at most INTAKE_MAX_CHARS of text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from aiohttp import web

from castlog import Audio, Eos, Error, LogReader, Tail

from ..claim import cast_url
from .formats import CONTENT_TYPES, Passthrough, converter, wav_header
from .stream import LISTENER_KIND
from .v1 import SpeechRequest, V1Refusal


async def whole_cast(
    speech: SpeechRequest, cast_id: str, tail: Tail, reader: LogReader, settled: int, headers: Mapping[str, str]
) -> web.Response:
    """The cast's audio in one response; 500 when the cast fails (nothing was sent yet). It follows
    the log through intake's shared tail, as a stream does (no blocking read of its own)."""
    fmt = speech.response_format
    convert = converter("pcm" if fmt == "wav" else fmt, speech.volume_multiplier)
    loop = asyncio.get_running_loop()
    parts: list[bytes] = []
    sent, seq, ended = -1, 0, False
    while not ended:  # a listener ends at an `error`; one that is history is followed past
        async with tail.listen(cast_id, seq, LISTENER_KIND) as listener:
            while not listener.done and not ended:
                item = await listener.next(None)
                if item is None:
                    break
                entry, record = item.entry, item.entry.record
                seq = entry.seq_num + 1
                if isinstance(record, Audio) and record.i > sent:
                    sent = record.i
                    parts.append(convert.feed(record.body) if isinstance(convert, Passthrough)
                                 else await loop.run_in_executor(None, convert.feed, record.body))
                elif isinstance(record, Eos):
                    ended = True
                elif isinstance(record, Error) and entry.seq_num > settled:
                    if await reader.tail(cast_id) > seq:
                        continue  # a later attempt follows it: history
                    raise V1Refusal(500, "synthesis_failed",
                                    f"the synthesis failed ({record.reason}); send the same request again to retry it")
            if listener.closed and not ended:
                raise V1Refusal(503, "shutting_down", "intake is stopping; send the same request again")
    parts.append(convert.close())
    body = b"".join(parts)
    if fmt == "wav":  # the length is known: a header with real sizes, not a stream's
        body = wav_header(data_bytes=len(body)) + body
    return web.Response(body=body, headers={
        "Content-Type": CONTENT_TYPES[fmt], "X-Cast-Id": cast_id, "Location": cast_url(cast_id), **headers,
    })
