"""The checks of the fault campaign (``bench/bench_faults.py``), made by reading Redis directly and
re-deriving each cast's playable view from the contract (docs/design.md), and the SSE followers.

A follower keeps its own copy of the log from the events it received: an event whose seq it
already had replaces that record and everything after it (the log shrank and was redone).
"""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout
from jobstreams import read_done
from redis.asyncio import Redis

import castlog
import chunking
from castlog import Audio, Entry, Eos, is_terminal
from castlog.records import decode_entry

# The kinds of record that end a log (castlog.is_terminal's, read here from the public JSON).
TERMINAL = {"eos", "error"}
# Decoded audio may differ from the sum of the chunk durations by about a frame per chunk.
DURATION_SLACK_MS_PER_CHUNK = 30
# A follower retries after a refused or broken stream this long after (edge or Redis restarting).
FOLLOW_RETRY_S = 0.5


@dataclass
class Follower:
    """An SSE client of one cast that resumes with Last-Event-ID, as EventSource does."""

    cast_id: str
    view: list[tuple[int, str, int]] = field(default_factory=list)  # (seq, kind, ts) as it holds them
    seen: set[tuple[int, int]] = field(default_factory=set)  # (seq, ts) of every event received
    duplicates: int = 0
    rewinds: int = 0
    reconnects: int = 0
    ended_at: float = 0.0

    async def follow(self, http: ClientSession, edge_url: str) -> None:
        url = f"{edge_url}/api/casts/{self.cast_id}/events"
        while True:
            headers = {"Last-Event-ID": str(self.view[-1][0])} if self.view else {}
            try:
                async with http.get(url, headers=headers, timeout=ClientTimeout(total=None, sock_read=60)) as resp:
                    if resp.status == 204:
                        break  # past the end of a finished log
                    if resp.status == 200 and await self._read(resp):
                        break
            except (ClientError, OSError, asyncio.TimeoutError):
                pass
            self.reconnects += 1
            await asyncio.sleep(FOLLOW_RETRY_S)
        self.ended_at = asyncio.get_running_loop().time()

    async def _read(self, resp: Any) -> bool:
        """Take in one stream; True when it ended with the log's terminal record."""
        last_kind = ""
        while True:
            try:
                block = await resp.content.readuntil(b"\n\n")
            except (asyncio.IncompleteReadError, ValueError):
                return False
            data = [ln[5:].strip() for ln in block.decode().split("\n") if ln.startswith("data:")]
            if not data:
                continue
            record = json.loads("".join(data))
            self._take(record["seq_num"], record["kind"], int(record["ts"]))
            last_kind = record["kind"]
            if last_kind in TERMINAL:
                return True

    def _take(self, seq: int, kind: str, ts: int) -> None:
        if (seq, ts) in self.seen:
            self.duplicates += 1
        self.seen.add((seq, ts))
        if self.view and seq <= self.view[-1][0]:
            self.rewinds += 1
            self.view = [v for v in self.view if v[0] < seq]
        self.view.append((seq, kind, ts))


@dataclass
class Verdict:
    violations: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def bad(self, what: str) -> None:
        self.violations.append(what)

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n


async def read_log(redis: Redis, cast_id: str) -> tuple[list[Entry], list[int]]:
    rows = await castlog.LogReader(redis).stored(cast_id)  # as stored: unknown kinds count in the seqs
    seqs = [castlog.keys.seq_of(raw) for raw, _ in rows]
    return [e for e in (decode_entry(raw, f) for raw, f in rows) if e is not None], seqs


async def check_cast(redis: Redis, cast_id: str, text: str, verdict: Verdict) -> list[Entry]:
    """Terminal, dense, nothing after the terminal record, every chunk once and in order."""
    entries, seqs = await read_log(redis, cast_id)
    if not entries:
        verdict.bad(f"{cast_id}: accepted but its log is gone")
        return entries
    if seqs != list(range(len(seqs))):
        verdict.bad(f"{cast_id}: seq numbers not dense: {seqs}")
    terminal = [e.seq_num for e in entries if is_terminal(e.record)]
    last = entries[-1]
    if not is_terminal(last.record):
        verdict.bad(f"{cast_id}: not terminal (last record {last.kind} at {last.seq_num})")
        return entries
    if terminal != [last.seq_num]:
        verdict.bad(f"{cast_id}: records after a terminal record (terminal at {terminal})")
    if last.kind == "error":
        verdict.bad(f"{cast_id}: ended in error without a model failure: {last.record.reason!r}")  # type: ignore[union-attr]
        return entries
    chunks = chunking.split_text(text)
    played = [e.record for e in castlog.playable(entries)]
    if [a.i for a in played if isinstance(a, Audio)] != list(range(len(chunks))):
        verdict.bad(f"{cast_id}: playable chunks {[a.i for a in played if isinstance(a, Audio)]}, want {len(chunks)}")
    elif [a.t for a in played if isinstance(a, Audio)] != chunks:
        verdict.bad(f"{cast_id}: playable texts differ from the splitter's chunks")
    offsets = [a.o for a in played if isinstance(a, Audio)]
    if offsets != [sum(a.d for a in played[:k] if isinstance(a, Audio)) for k in range(len(played))]:
        verdict.bad(f"{cast_id}: audio offsets are not the running sum of durations")
    eos = last.record
    assert isinstance(eos, Eos)
    if eos.sentences != len(chunks):
        verdict.bad(f"{cast_id}: eos says {eos.sentences} sentences, want {len(chunks)}")
    return entries


async def check_queue(redis: Redis, finished: set[str], verdict: Verdict) -> None:
    """No pending or undelivered job; at least one receipt per finished cast."""
    groups: Any = await redis.xinfo_groups(castlog.JOBS)
    group = next((g for g in groups if g["name"] in (b"synth", "synth")), None)
    if group is None or int(group["pending"]) or int(group.get("lag") or 0):
        verdict.bad(f"jobs not settled: {group}")
    per_cast: dict[str, int] = {}
    for done in await read_done(redis):
        per_cast[done.id] = per_cast.get(done.id, 0) + 1
    for cid in finished:
        if per_cast.get(cid, 0) == 0:
            verdict.bad(f"{cid}: finished without a receipt")
    verdict.count("receipts repeated", sum(n - 1 for c, n in per_cast.items() if c in finished and n > 1))
    verdict.count("dead letters", int(await redis.xlen(castlog.JOBS_DEAD)))


async def check_audio(http: ClientSession, edge_url: str, cast_id: str, entries: list[Entry], verdict: Verdict) -> None:
    """The whole MP3 from edge equals the playable bodies and decodes to their duration."""
    want = [e.record for e in castlog.playable(entries) if isinstance(e.record, Audio)]
    async with http.get(f"{edge_url}/api/casts/{cast_id}/audio.mp3", timeout=ClientTimeout(total=60)) as resp:
        body = await resp.read()
        length = resp.content_length
    if body != b"".join(a.body for a in want) or length != len(body):
        verdict.bad(f"{cast_id}: /audio.mp3 has {len(body)} bytes (Content-Length {length}), "
                    f"the playable view {sum(len(a.body) for a in want)}")
        return
    decoded_ms = _decoded_ms(body)
    if abs(decoded_ms - sum(a.d for a in want)) > DURATION_SLACK_MS_PER_CHUNK * len(want):
        verdict.bad(f"{cast_id}: /audio.mp3 decodes to {decoded_ms} ms, the records say {sum(a.d for a in want)}")


def _decoded_ms(data: bytes) -> int:
    import av  # the synth extra's decoder

    with av.open(io.BytesIO(data), "r", format="mp3") as box:
        samples = sum(frame.samples for frame in box.decode(audio=0))
    return samples * 1000 // 24_000


def check_follower(follower: Follower, entries: list[Entry], verdict: Verdict) -> None:
    """It ended holding exactly the log's records and never got one record twice."""
    want = [(e.seq_num, e.kind, e.ts) for e in entries]
    if follower.view != want:
        verdict.bad(f"{follower.cast_id}: the SSE follower holds {[v[:2] for v in follower.view]}, the log "
                    f"{[w[:2] for w in want]}")
    if follower.duplicates:
        verdict.bad(f"{follower.cast_id}: the SSE follower got {follower.duplicates} record(s) twice")
    verdict.count("follower rewinds", follower.rewinds)
    verdict.count("follower reconnects", follower.reconnects)
