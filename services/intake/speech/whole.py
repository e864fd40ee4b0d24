"""``"stream": false`` (Kokoro-FastAPI's): the cast's whole audio as one file with a Content-Length.

The cast is followed to its end as ``stream.py`` follows it (``follow.cast_audio``), each chunk
converted as it comes; the answer goes out once the cast is done. Bounded: a cast is at most INTAKE_MAX_CHARS of text.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import aclosing

from aiohttp import web

from castlog import LogReader
from fanout import Tail

from ..claim import cast_url
from .follow import cast_audio
from .formats import CONTENT_TYPES, converter, wav_header
from .stream import LISTENER_KIND, convert_chunk
from .v1 import SpeechRequest


async def whole_cast(
    speech: SpeechRequest, cast_id: str, tail: Tail, reader: LogReader, settled: int, headers: Mapping[str, str]
) -> web.Response:
    """The cast's audio in one response; a refusal when the cast fails (``CastFailed``: nothing was
    sent yet). It follows the log through intake's shared tail, as a stream does (no blocking
    read of its own)."""
    fmt = speech.response_format
    convert = converter("pcm" if fmt == "wav" else fmt, speech.volume_multiplier)
    parts: list[bytes] = []
    async with aclosing(cast_audio(tail, reader, cast_id, settled, LISTENER_KIND)) as records:
        async for record in records:
            parts.append(await convert_chunk(convert, record.body))
    parts.append(convert.close())
    body = b"".join(parts)
    if fmt == "wav":  # the length is known: a header with real sizes, not a stream's
        body = wav_header(data_bytes=len(body)) + body
    return web.Response(body=body, headers={
        "Content-Type": CONTENT_TYPES[fmt], "X-Cast-Id": cast_id, "Location": cast_url(cast_id), **headers,
    })
