"""Durable streams on Redis Streams: the storage side of the Durable Streams protocol.

One stream per path: its meta hash, its log (one entry per append) and its producers' hash
(scripts in ``scripts.py``), named with its family's hash tag (``keys.py``): a fork
lives in its source's family, so every script's keys share one slot of a Redis Cluster. An offset is the entry id of the last entry read, written as two
fixed-width decimal numbers so that offsets sort as strings the way the ids sort [R:ds-offsets].
A fork keeps no copy of its source: its log starts above the fork point and reads stitch the
source's entries up to that point to its own [R:ds-fork]. Nothing here knows HTTP.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio import Redis

from castlog.keys import decoded, id_order

from . import scripts
from .keys import Links, keys_of, link_key, log_key, meta_key

# A path is this long at most, in characters; its segments are URL-safe and never . or ..
MAX_PATH_CHARS = 256
_PATH = re.compile(r"[A-Za-z0-9._~!$'()*+,;=:@-]+(?:/[A-Za-z0-9._~!$'()*+,;=:@-]+)*")
ZERO_ID = "0-0"
# Offsets: `<ms>_<seq>` of the entry id, 16 digits each: long enough for any id Redis makes.
OFFSET_DIGITS = 16
_OFFSET = re.compile(r"(\d{%d})_(\d{%d})" % (OFFSET_DIGITS, OFFSET_DIGITS))
# The most bytes one stream holds (its own appends; a fork's inherited bytes are its source's).
MAX_STREAM_BYTES = 64 * 1024 * 1024
# Forks of forks: a read from the start walks the chain (one HGETALL per link), so it is bounded.
MAX_FORK_DEPTH = 32
# Entries per XRANGE while a read gathers its bytes.
RANGE_BATCH = 100
JSON_TYPE = "application/json"
OCTET_STREAM = "application/octet-stream"
# The content types a stream may have: passive ones, that no browser renders as a page or runs
# as script (text/html, image/svg+xml, application/javascript, text/xml ... are refused at
# create), so no stream served on this origin becomes active content [R:ds-passive-types].
STREAM_TYPES = frozenset({
    "text/plain", "text/csv", "text/markdown", JSON_TYPE, "application/ndjson", "application/x-ndjson",
    "application/jsonl", OCTET_STREAM, "application/x-protobuf", "application/protobuf", "application/cbor",
    "application/msgpack", "application/x-msgpack", "audio/mpeg", "audio/ogg", "audio/opus", "audio/wav",
    "audio/webm", "audio/aac", "audio/flac", "audio/pcm", "image/png", "image/jpeg", "image/gif", "image/webp",
    "video/mp4", "video/webm",
})
# A parameter list (`; charset=utf-8`) of plain tokens: no comma, which a browser reads as a
# second media type (`text/plain;a=b,text/html` is HTML to Fetch's MIME sniffing rules).
_PARAMS = re.compile(r"(?:\s*;\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+=[A-Za-z0-9!#$%&'*+.^_`|~-]+)*\s*")


def valid_path(path: str) -> bool:
    """A stream name: bounded, URL-safe segments, none of them ``.`` or ``..``."""
    if len(path) > MAX_PATH_CHARS or _PATH.fullmatch(path) is None:
        return False
    return all(part not in (".", "..") for part in path.split("/"))


def offset_of(entry: str | bytes) -> str:
    """The opaque, sortable offset of a Redis entry id."""
    ms, seq = id_order(entry)
    return f"{ms:0{OFFSET_DIGITS}d}_{seq:0{OFFSET_DIGITS}d}"


def entry_of(offset: str) -> str | None:
    """The entry id an offset names, or None for anything that is not an offset we made."""
    match = _OFFSET.fullmatch(offset)
    return f"{int(match[1])}-{int(match[2])}" if match else None


def normal_type(content_type: str) -> str:
    """``text/Plain; charset=utf-8`` -> ``text/plain``: what matching compares."""
    return content_type.split(";", 1)[0].strip().lower()


def passive_type(content_type: str) -> bool:
    """A type a stream may have: one of ``STREAM_TYPES``, with plain parameters only."""
    kind, _, params = content_type.partition(";")
    return kind.strip().lower() in STREAM_TYPES and _PARAMS.fullmatch(";" + params if params else "") is not None


def served_type(content_type: str) -> str:
    """The type a read answers with: the stream's own, or ``application/octet-stream`` for one
    that is not passive (stored before the list, or a fork of such a stream)."""
    return content_type if passive_type(content_type) else OCTET_STREAM


def is_json(content_type: str) -> bool:
    return normal_type(content_type) == JSON_TYPE


class BadJson(ValueError):
    """An append to a JSON stream that is not JSON, or an empty array where messages are due."""


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def json_entry(body: bytes, creating: bool) -> bytes | None:
    """A JSON append as one stored entry: its messages, comma-separated. An array is flattened
    one level [R:ds-json]; ``[]`` is no message (allowed only when creating: None)."""
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise BadJson(f"the body is not valid JSON: {exc}") from None
    except RecursionError:  # nested past the parser's depth: a hostile body, not a server fault
        raise BadJson("the body's JSON is nested too deep") from None
    messages = value if isinstance(value, list) else [value]
    if not messages:
        if creating:
            return None
        raise BadJson("an empty JSON array appends nothing")
    try:
        return ",".join(json.dumps(m, ensure_ascii=False, separators=(",", ":")) for m in messages).encode()
    except UnicodeEncodeError:  # a lone surrogate (\ud800): JSON may say it, UTF-8 may not
        raise BadJson("the body holds a string that is not Unicode text (a lone surrogate)") from None


def json_messages(entry: bytes) -> list[bytes]:
    """The messages of one stored JSON entry, each as JSON text."""
    return [json.dumps(m, ensure_ascii=False, separators=(",", ":")).encode() for m in json.loads(b"[" + entry + b"]")]


@dataclass(frozen=True)
class Meta:
    """A stream's configuration and state as one script saw it."""

    path: str
    content_type: str
    ttl: int | None
    expires_at: str | None
    closed: bool
    tail: str  # entry id of the last byte (the fork point, or 0-0, while it has none of its own)
    source: str | None
    fork_at: str | None  # entry id: the source's entries up to here are this stream's
    fork_sub: int
    refs: int
    gone: bool  # soft-deleted: forks still read it
    depth: int  # forks between it and the first stream of its chain
    family: str  # whose hash tag its keys carry (keys.py): its own path, or its source's family
    owner: str  # who writes it (intake names it); "" for a stream stored before owners
    deadline: int | None = None  # ms (Redis's clock) when it lapses; None: never

    @property
    def expires_at_ms(self) -> int | None:
        """When its keys expire natively (the backstop), or None while they live on."""
        if self.deadline is None or self.refs > 0 or self.gone:
            return None
        return self.deadline + scripts.BACKSTOP_MS

    @property
    def log(self) -> str:
        """Its log's key."""
        return log_key(self.path, self.family)

    @property
    def tail_offset(self) -> str:
        return offset_of(self.tail)

    @staticmethod
    def of(path: str, flat: Sequence[bytes], family: str) -> Meta:
        m = {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}
        return Meta(
            path=path, content_type=m.get("ct", "application/octet-stream"),
            ttl=int(m["ttl"]) if "ttl" in m else None, expires_at=m.get("exp"), closed="closed" in m,
            tail=m.get("tail", ZERO_ID), source=m.get("src"), fork_at=m.get("fofs"),
            fork_sub=int(m.get("fsub", "0")), refs=int(m.get("refs", "0")),
            gone="gone" in m, depth=int(m.get("depth", "0")), family=family, owner=m.get("own", ""),
            deadline=int(m["dl"]) if "dl" in m else None,
        )


@dataclass(frozen=True)
class Spec:
    """What a create asks for."""

    content_type: str
    ttl: int | None = None
    expires_at: str | None = None
    deadline_ms: int | None = None  # of expires_at
    closed: bool = False
    source: str | None = None
    fork_at: str | None = None  # entry id
    fork_sub: int = 0
    owner: str = ""  # who may write it (intake names every stream's; "": a library caller's own)


@dataclass(frozen=True)
class Outcome:
    """A script's answer: ``status`` (a word the script chose), the stream's meta where it is
    alive, and the words that go with the status (a producer's epoch or sequence numbers)."""

    status: str
    meta: Meta | None = None
    detail: tuple[str, ...] = ()


@dataclass(frozen=True)
class Slice:
    """Entries of a read, oldest first: (entry id, bytes); the entry id it ends at (its last
    entry's, else the tail's); ``complete`` when it reaches the tail, ``closed`` when that tail is
    a closed stream's end."""

    entries: list[tuple[str, bytes]]
    end: str
    complete: bool
    closed: bool

    @staticmethod
    def of(meta: Meta, entries: list[tuple[str, bytes]], complete: bool) -> Slice:
        end = entries[-1][0] if entries else meta.tail
        return Slice(entries, end, complete, meta.closed and complete and end == meta.tail)


def _words(reply: Sequence[object]) -> tuple[str, ...]:
    return tuple(decoded(w) for w in reply)


def _word(reply: Sequence[object], i: int) -> str:
    """Word ``i`` of a script's reply (its status is word 0), or '' past its end."""
    return decoded(reply[i]) if len(reply) > i else ""


# A fork's claim of its path meets a stream at home that goes meanwhile: it claims again, this often.
CLAIM_TRIES = 3


class DurableStreams:
    """Every operation on the durable streams; one per process, on a pooled client (a single
    Redis or a cluster: each script's keys are of one family, so of one slot)."""

    def __init__(self, redis: Redis, max_stream_bytes: int = MAX_STREAM_BYTES) -> None:
        self.redis = redis
        self.max_stream_bytes = max_stream_bytes
        self.links = Links()
        self._create = redis.register_script(scripts.CREATE)
        self._append = redis.register_script(scripts.APPEND)
        self._open = redis.register_script(scripts.OPEN)
        self._delete = redis.register_script(scripts.DELETE)
        self._release = redis.register_script(scripts.RELEASE)
        self._link = redis.register_script(scripts.LINK)
        self._link_life = redis.register_script(scripts.LINK_LIFE)

    async def create(self, path: str, spec: Spec, entries: Sequence[bytes]) -> Outcome:
        """``created`` or ``exists`` (with the meta to compare, its owner included), ``gone``,
        ``nosrc``, ``srcgone``, ``not_owner`` (a fork of another owner's stream), ``too_big``,
        ``too_deep`` (a fork past ``MAX_FORK_DEPTH``), ``elsewhere`` (a fork at a path that an
        earlier fork of another family holds)."""
        args = [
            spec.content_type, normal_type(spec.content_type), _opt(spec.ttl), spec.expires_at or "",
            _opt(spec.deadline_ms), "1" if spec.closed else "", spec.source or "", spec.fork_at or "",
            str(spec.fork_sub) if spec.fork_sub else "", str(self.max_stream_bytes), str(MAX_FORK_DEPTH), spec.owner,
            *entries,
        ]
        wanted = await self.family_of(spec.source) if spec.source else self.links.family(path)
        family = wanted
        for _ in range(CLAIM_TRIES):
            if family != path:  # a fork away from home: its path is claimed for the family first
                refused = await self._refusal(spec, family, entries)
                if refused is not None:  # (so that a refused fork leaves no link)
                    return Outcome(refused)
                claimed = await self._claim(path, family)
                if claimed is None:  # a stream is at home
                    found = await self._run_at(path, path, self._open, ["0"])
                    if found.status == "missing":
                        continue  # it went meanwhile: claim again
                    return Outcome("exists", found.meta) if found.meta is not None else found
                family = claimed
            if spec.source and family != wanted:  # the source's family cannot reach this path's
                found = await self._run_at(path, family, self._open, ["0"])
                return Outcome("exists", found.meta) if found.meta is not None else Outcome("elsewhere")
            source_key = meta_key(spec.source, family) if spec.source else meta_key(path, family)
            home = [link_key(path)] if family == path else []
            reply = await self._create(keys=[*keys_of(path, family), source_key, *home], args=args)
            status = _word(reply, 0)
            if status == "linked":  # linked to a family meanwhile (or before this process knew)
                family = _word(reply, 1)
                self.links.keep(path, family)
                if not spec.source:
                    wanted = family
                continue
            if status in ("created", "exists"):
                await self._release_chain(_word(reply, 2), family)
                meta = Meta.of(path, reply[1], family)
                if family != path and await self._claim(path, family) != family:
                    # its link went meanwhile (the stream before it went) and the path is another's
                    # now: this stream would be out of reach, so it goes, and the create asks again
                    await self._delete_at(path, family, spec.owner)
                    continue
                await self._follow(path, meta)
                if status == "created" and spec.source:  # the source lives on while its fork does
                    await self._set_link_life(spec.source, family, "")
                return Outcome(status, meta)
            await self._release_chain(_word(reply, 1), family)
            if status != "gone":  # (a refused fork claimed its path; a soft-deleted stream keeps it)
                await self._drop_link(path, family)
            return Outcome(status)
        raise RuntimeError(f"durable stream {path!r}: its home kept changing while a fork claimed it")

    async def _refusal(self, spec: Spec, family: str, entries: Sequence[bytes]) -> str | None:
        """What CREATE would refuse a fork for, asked before its path is linked (the script asks again)."""
        if sum(len(e) for e in entries) > self.max_stream_bytes:
            return "too_big"
        if not spec.source:
            return None
        source = await self.peek(spec.source, family)
        if source is None:
            return "nosrc"
        if source.gone:
            return "srcgone"
        if source.owner != spec.owner:
            return "not_owner"
        return "too_deep" if source.depth + 1 > MAX_FORK_DEPTH else None

    async def _claim(self, path: str, family: str) -> str | None:
        """The family ``path`` is linked to once claimed for ``family`` (an earlier link wins), or
        None while a stream is at home."""
        reply = await self._link(keys=[*keys_of(path), link_key(path)], args=[family])
        if _word(reply, 0) == "home":
            return None
        linked, released = _words(reply[1:3])
        await self._release_chain(released, path)
        self.links.keep(path, linked)
        return linked

    async def family_of(self, path: str) -> str:
        """Where ``path``'s keys are: a link read (or kept, while a stream is where it leads), else
        its own path."""
        kept = self.links.family(path)
        if kept != path:
            if await self.redis.exists(meta_key(path, kept)):
                return kept
            self.links.forget(path)
        return await self.links.read(self.redis, path) or path

    async def _follow(self, path: str, meta: Meta) -> None:
        """A linked stream's link takes its expiry (none while forks read it, or it has none)."""
        if meta.family != path:
            expiry = meta.expires_at_ms
            await self._set_link_life(path, meta.family, "" if expiry is None else str(expiry))

    async def _set_link_life(self, path: str, family: str, life: str) -> bool:
        if family == path:
            return False
        return bool(await self._link_life(keys=[link_key(path)], args=[family, life]))

    async def _drop_link(self, path: str, family: str) -> None:
        """No stream at ``path`` in ``family`` (it went, or never came): its link goes, unless a
        stream came there meanwhile (then it is claimed again; a create that lost it checks)."""
        if family == path:
            return
        self.links.forget(path)
        if await self._set_link_life(path, family, "del") and await self.redis.exists(meta_key(path, family)):
            await self._claim(path, family)

    async def append(
        self, path: str, content_type: str, entries: Sequence[bytes], *, owner: str = "", stream_seq: str | None = None,
        producer: tuple[str, int, int] | None = None, close: bool = False,
    ) -> Outcome:
        """``ok``, ``not_owner`` (``owner`` is not the stream's), ``duplicate`` (detail: the
        producer's last seq), ``closed``, ``ct_mismatch``, ``stale_epoch`` (detail: the current
        epoch), ``epoch_jump`` (detail: the current epoch), ``gap`` (detail: expected, received),
        ``epoch_seq``, ``seq_conflict``, ``too_big``, ``missing``, ``gone``."""
        pid, epoch, seq = producer if producer else ("", "", "")
        args = [normal_type(content_type) if entries else "", stream_seq or "", pid, str(epoch), str(seq),
                "1" if close else "", str(self.max_stream_bytes), owner, *entries]
        return await self._located(path, self._append, args)

    async def open(self, path: str, *, touch: bool) -> Outcome:
        """``ok`` with the meta (a read slides the TTL; a HEAD does not), ``missing`` or ``gone``."""
        return await self._located(path, self._open, ["1" if touch else "0"])

    async def delete(self, path: str, owner: str = "") -> str:
        """``deleted``, ``soft`` (forks still read it), ``not_owner``, ``missing`` or ``gone``."""
        family = self.links.family(path)
        status = await self._delete_at(path, family, owner)
        if status == "missing" and (linked := await self._relocated(path, family)) is not None:
            status = await self._delete_at(path, linked, owner)
        return status

    async def _relocated(self, path: str, family: str) -> str | None:
        """Where to look next for a stream missing in ``family``: the family its link names now
        (a kept link may have gone, or the stream may be at home now), or None: nowhere else."""
        linked = await self.links.read(self.redis, path)
        if linked is None:
            return path if family != path else None
        return linked if linked != family else None

    async def _delete_at(self, path: str, family: str, owner: str) -> str:
        reply = await self._delete(keys=keys_of(path, family), args=[owner])
        status = _word(reply, 0)
        if status in ("deleted", "missing"):
            await self._release_chain(_word(reply, 1), family)  # '' (none) leaves it be
            await self._drop_link(path, family)
        return status

    async def _located(self, path: str, script: Callable[..., Awaitable[Any]], args: list[Any]) -> Outcome:
        """``script`` on the stream where it is: at home, unless it is missing there and linked."""
        family = self.links.family(path)
        outcome = await self._run_at(path, family, script, args)
        if outcome.status == "missing" and (linked := await self._relocated(path, family)) is not None:
            return await self._run_at(path, linked, script, args)
        return outcome

    async def _run_at(self, path: str, family: str, script: Callable[..., Awaitable[Any]], args: list[Any]) -> Outcome:
        reply = await script(keys=keys_of(path, family), args=args)
        status = _word(reply, 0)
        if status == "missing":  # lapsed just now, or never there
            await self._release_chain(_word(reply, 1), family)
            await self._drop_link(path, family)
            return Outcome(status)
        if status == "gone":
            return Outcome(status)
        flat = reply[1]
        assert isinstance(flat, list)
        meta = Meta.of(path, flat, family)
        if meta.ttl is not None:  # its expiry slid: so does its link's
            await self._follow(path, meta)
        return Outcome(status, meta, _words(reply[2:]))

    async def _release_chain(self, source: str, family: str) -> None:
        """A fork went: its source (of its family) loses a reference, and a soft-deleted source
        nobody reads goes too, up the chain."""
        while source:
            reply = await self._release(keys=keys_of(source, family))
            words = _words(reply)
            if words[0] == "ok" and source != family and (meta := await self.peek(source, family)) is not None:
                await self._follow(source, meta)  # it may expire again now that fewer forks read it
            elif words[0] in ("deleted", "missing"):
                await self._drop_link(source, family)
            source = words[1] if words[0] == "deleted" and len(words) > 1 else ""

    async def peek(self, path: str, family: str) -> Meta | None:
        """A stream's meta without touching it (a fork's source, soft-deleted or not)."""
        found = cast("dict[bytes, bytes]", await self.redis.hgetall(meta_key(path, family)))
        if not found:
            return None
        return Meta.of(path, [x for kv in found.items() for x in kv], family)

    async def read(self, meta: Meta, after: str, max_bytes: int) -> Slice:
        """Entries after ``after`` up to the tail ``meta`` saw, through the fork chain, about
        ``max_bytes`` at most (always at least one entry when there is one)."""
        segments = await self._segments(meta, after)
        entries: list[tuple[str, bytes]] = []
        size = 0
        for key, low, high in segments:
            start = "(" + low
            while True:
                batch = cast("list[tuple[bytes, dict[bytes, bytes]]]",
                             await self.redis.xrange(key, start, high, count=RANGE_BATCH))
                for raw_id, fields in batch:
                    data = fields.get(b"d")
                    if data is None:
                        continue  # a close marker
                    entry = raw_id.decode()
                    entries.append((entry, data))
                    size += len(data)
                    if size >= max_bytes:
                        return Slice.of(meta, entries, id_order(entry) >= id_order(meta.tail))
                if len(batch) < RANGE_BATCH:
                    break
                start = "(" + batch[-1][0].decode()
        return Slice.of(meta, entries, True)

    async def _segments(self, meta: Meta, after: str) -> list[tuple[str, str, str]]:
        """(log key, after this id, up to this id) per stream of the chain, source first."""
        segments: list[tuple[str, str, str]] = []
        current: Meta | None = meta
        high = meta.tail
        while current is not None:
            low = max(after, current.fork_at or ZERO_ID, key=id_order)
            if id_order(low) < id_order(high):
                segments.insert(0, (current.log, low, high))
            if current.source is None or current.fork_at is None or id_order(after) >= id_order(current.fork_at):
                break
            high = min(high, current.fork_at, key=id_order)
            current = await self.peek(current.source, current.family)  # a chain is one family
        return segments

    async def first_after(self, meta: Meta, after: str) -> bytes | None:
        """The first entry past ``after`` (a sub-offset fork cuts into it), or None."""
        found = await self.read(meta, after, 1)
        return found.entries[0][1] if found.entries else None


def _opt(value: int | None) -> str:
    return "" if value is None else str(value)
