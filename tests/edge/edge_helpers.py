"""Helpers for the edge tests: casts written through castlog, real MP3 chunks, an SSE reader."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from aiohttp import ClientResponse
from redis.asyncio import Redis

from castlog import SAMPLE_RATE, Audio, CastStore, Eos, Meta, Record, Start, cast_key, content_id
from castlog.records import decode_entry

VOICE = "af_heart"


def tone(ms: int, freq: float = 440.0) -> np.ndarray:
    t = np.arange(SAMPLE_RATE * ms // 1000) / SAMPLE_RATE
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def mp3_chunk(ms: int, freq: float = 440.0) -> tuple[bytes, int]:
    """One standalone MP3 chunk of a tone and its exact decoded duration in ms."""
    try:
        from synth.mp3 import encode_chunk  # the synth's own encoder: what casts really hold
    except ImportError:  # pragma: no cover - only while synth is not installed
        return _pyav_chunk(tone(ms, freq))
    chunk = encode_chunk(tone(ms, freq))
    return chunk.data, chunk.duration_ms


def _pyav_chunk(pcm: np.ndarray) -> tuple[bytes, int]:  # pragma: no cover
    import av

    out = io.BytesIO()
    with av.open(out, "w", format="mp3", container_options={"write_xing": "0", "id3v2_version": "0"}) as box:
        stream = box.add_stream("libmp3lame", rate=SAMPLE_RATE, layout="mono")
        stream.bit_rate = 48_000
        frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="flt", layout="mono")
        frame.sample_rate = SAMPLE_RATE
        for packet in stream.encode(frame):
            box.mux(packet)
        for packet in stream.encode(None):
            box.mux(packet)
    data = out.getvalue()
    return data, round(len(decode_mp3(data)) * 1000 / SAMPLE_RATE)


def decode_mp3(data: bytes) -> np.ndarray:
    import av

    with av.open(io.BytesIO(data), "r", format="mp3") as box:
        frames = [f.to_ndarray().reshape(-1) for f in box.decode(audio=0)]
    return np.concatenate(frames) if frames else np.zeros(0, np.float32)


def cast_id(n: int | str = 0) -> str:
    return content_id(f"edge test cast {n}", VOICE)


def meta(sentences: int, title: str = "a test") -> Meta:
    return Meta(title=title, voice=VOICE, chars=10 * sentences, sentences=sentences, created_at=0)


def audio_records(texts: Sequence[str], *, body_bytes: int | None = None, ms: int = 300,
                  start_i: int = 0, start_o: int = 0) -> list[Audio]:
    """Audio records with real MP3 bodies (or ``body_bytes`` filler bytes, for volume tests)."""
    out, o = [], start_o
    for k, text in enumerate(texts):
        if body_bytes is None:
            body, d = mp3_chunk(ms, 220.0 + 40 * ((start_i + k) % 12))
        else:
            body, d = bytes([(start_i + k) % 251]) * body_bytes, ms
        out.append(Audio(i=start_i + k, t=text, d=d, o=o, body=body))
        o += d
    return out


@dataclass
class Cast:
    store: CastStore
    id: str
    tail: int = 0

    async def submit(self, sentences: int, title: str = "a test") -> None:
        result = await self.store.submit(self.id, f"text of {self.id}", VOICE, meta(sentences, title))
        assert result == "new"
        self.tail = 1

    async def append(self, *records: Record) -> None:
        self.tail = await self.store.append(self.id, self.tail, list(records))


async def write_cast(store: CastStore, cid: str, texts: Sequence[str], *, finish: bool = True,
                     body_bytes: int | None = None) -> Cast:
    cast = Cast(store, cid)
    await cast.submit(len(texts))
    await cast.append(Start(attempt=1, resume_from=0, at=0))
    audio = audio_records(texts, body_bytes=body_bytes)
    await cast.append(*audio)
    if finish:
        await cast.append(Eos(sentences=len(texts), audio_ms=sum(a.d for a in audio), attempts=1))
    return cast


async def xrange_public(redis: Redis, cid: str) -> list[dict[str, Any]]:
    """The log as XRANGE sees it, in the public JSON form, computed here independently."""
    out = []
    for raw_id, fields in await redis.xrange(cast_key(cid)):
        entry = decode_entry(raw_id, fields)
        assert entry is not None
        headers = json.loads(fields[b"h"])
        headers.pop("e")
        body = fields.get(b"b")
        out.append({
            "seq_num": entry.seq_num, "kind": fields[b"e"].decode(), "ts": int(fields[b"ts"]),
            "headers": headers, "body": base64.b64encode(body).decode() if body else None,
        })
    return out


@dataclass
class Event:
    id: str | None
    event: str
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


def parse_sse(block: str) -> Event | None:
    """One SSE block (lines up to a blank line); None for comments and retry-only blocks."""
    fields: dict[str, list[str]] = {}
    for line in block.split("\n"):
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)
    if "data" not in fields:
        return None
    return Event(fields.get("id", [None])[-1], fields.get("event", ["message"])[-1], "\n".join(fields["data"]))


async def read_events(resp: ClientResponse, limit: int = 100_000, timeout_s: float = 30.0) -> list[Event]:
    """Events of one SSE response until the server ends it."""
    events: list[Event] = []

    async def read() -> None:
        while len(events) < limit:
            try:
                block = await resp.content.readuntil(b"\n\n")
            except asyncio.IncompleteReadError:
                return
            if not block:
                return
            event = parse_sse(block.decode())
            if event is not None:
                events.append(event)

    await asyncio.wait_for(read(), timeout_s)
    return events


def dechunk(raw: bytes) -> bytes:
    """The body of a chunked HTTP/1.1 response (headers included in ``raw``), complete chunks only."""
    _head, _, rest = raw.partition(b"\r\n\r\n")
    body = bytearray()
    while rest:
        size_line, sep, rest = rest.partition(b"\r\n")
        if not sep:
            break
        size = int(size_line.split(b";")[0], 16)
        if size == 0 or len(rest) < size + 2:
            break
        body += rest[:size]
        rest = rest[size + 2 :]
    return bytes(body)


async def command_calls(redis: Redis) -> dict[str, int]:
    """Calls per command from INFO commandstats (the INFO calls themselves left out)."""
    stats = await redis.info("commandstats")
    return {k: int(v["calls"]) for k, v in stats.items() if k not in ("cmdstat_info",)}


def calls_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
