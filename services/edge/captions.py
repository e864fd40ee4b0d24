"""``GET /api/casts/{id}/captions``: the cast's words and sentences as WebVTT.

Each playable audio record gives one sentence cue (its text, from ``o`` to ``o + d``) and one
cue per word (``o`` plus the word's own times). ``?cues=words`` or ``?cues=sentences`` keeps
one kind. A cast still being made gets the cues of the audio so far.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web

from castlog import Audio

from .context import known_cast
from .params import captions_query

CONTENT_TYPE = "text/vtt"


def timestamp(ms: int) -> str:
    hours, rest = divmod(max(0, ms), 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}"


def _cue(ident: str, start: int, end: int, text: str) -> str:
    # "-->" cannot appear in a cue's text, nor a blank line
    text = " ".join(text.replace("-->", "->").split())
    return f"{ident}\n{timestamp(start)} --> {timestamp(max(start, end))}\n{text}\n"


def webvtt(records: Iterable[Audio], kinds: str = "all") -> str:
    """The WebVTT document of these audio records, cues in order of their start."""
    cues: list[tuple[int, int, str]] = []
    for record in records:
        if kinds in ("all", "sentences"):
            cues.append((record.o, 0, _cue(f"s{record.i}", record.o, record.o + record.d, record.t)))
        if kinds in ("all", "words"):
            for k, (word, start, end) in enumerate(record.w):
                cues.append((record.o + start, 1, _cue(f"w{record.i}.{k}", record.o + start, record.o + end, word)))
    cues.sort(key=lambda c: (c[0], c[1]))
    return "WEBVTT\n\n" + "\n".join(text for _, _, text in cues)


async def captions(request: web.Request) -> web.Response:
    q = captions_query(request)
    layout = (await known_cast(request, q.cast_id)).layout
    headers = {"Cache-Control": "public, max-age=86400, immutable" if layout.finished else "no-cache"}
    return web.Response(text=webvtt(layout.audio, q.cues), content_type=CONTENT_TYPE, charset="utf-8", headers=headers)
