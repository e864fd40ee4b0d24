"""Open (live) casts: created without their text, fed fragments in order, then closed.

The cast log of an open cast is written as any other (intake writes ``meta`` with ``live``, the
worker the rest); its text grows in the private catalog stream ``catalog/<id>``:

- the first entry is the recipe, with ``live=1`` and an empty ``text``;
- ``{t, o, end}``: a fragment ``t`` sent at offset ``o`` (code points of the text as sent),
  ending at ``end``; offsets make a resend harmless and a gap visible;
- ``{flush, end}``: everything up to ``end`` is to be spoken now, complete sentence or not;
- ``{closed, end, cid}``: the text is complete; ``cid`` is the content id of the final text.

Writing is a capability apart from reading: the id is the cast's public link, so opening a cast
also makes a secret *write token* (handed once to its opener) and the recipe keeps only its
SHA-256 (``wh``). :meth:`LiveStore.writer` compares a token's hash with it in constant time.

The job goes to its lane's ``jobs/live/lane/{lN}`` (keys.py; synth moves it into ``jobs/live``,
not ``jobs``) so that an open cast waiting for text never waits behind a queue of whole-text
casts, and the worker bounds open casts apart from the others. The opener's cap of open casts is
kept in its own slot (opencap.py).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Literal, cast

from redis.asyncio import Redis

from . import keys
from .batching import NotReplicated, ScriptBatcher
from .ids import content_id
from .keys import Rows
from .lanes import Bell
from .lua import FIELD
from .opencap import OpenCap
from .ratelimit import RateLimited, RateLimiter
from .records import Meta, encode_headers
from .scripts import NOW_MS
from .streams import Recipe, decode_or_none, read_recipe

# Attempts at a fresh random id before giving up (a collision needs 2**72 luck).
OPEN_ID_TRIES = 3

# Random bytes of a write token (43 URL-safe characters): no guessing it.
WRITE_TOKEN_BYTES = 32
# Hex characters of a client tag (64 bits): tells clients apart, and no more.
CLIENT_TAG_CHARS = 16


class TooManyOpen(Exception):
    """The client holds its cap of open casts; nothing was written (its token was spent)."""

# KEYS[1]: pub/casts/{lN}/<id>, KEYS[2]: catalog/{lN}/<id>, KEYS[3]: jobs/live/lane/{lN} (one lane)
# ARGV[1]: id, ARGV[2]: voice, ARGV[3]: title, ARGV[4]: meta headers (JSON), ARGV[5]: speed,
# ARGV[6]: the write token's hash, ARGV[7]: the opener's client tag (client_tag: a hash, never
# the address; '' for none)
# Claims a fresh random id: recipe (live, no text, the token's hash), meta and the job; 'taken'
# if the id is used. The opener's bucket and its cap of open casts are taken before, each in its
# own step (opencap.py): they lie in the client's slot, not the cast's lane.
OPEN = (
    NOW_MS
    + """
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return 'taken' end
redis.call('XADD', KEYS[2], '*', 'text', '', 'voice', ARGV[2], 'title', ARGV[3], 'created_at', now,
  'live', '1', 'speed', ARGV[5], 'wh', ARGV[6], 'client', ARGV[7])
redis.call('XADD', KEYS[1], '0-1', 'e', 'meta', 'h', ARGV[4], 'ts', now)
redis.call('XADD', KEYS[3], '*', 'id', ARGV[1], 'voice', ARGV[2], 'enqueued_at', now, 'client', ARGV[7])
return 'new'
"""
)


# The state of an open cast's catalog: 'missing', 'not_live', 'closed' or 'open', and its end.
_STATE = (
    FIELD
    + """
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
if not first then return {'missing', 0} end
if field(first, 'live') ~= '1' then return {'not_live', 0} end
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
local stored_end = tonumber(field(last, 'end') or '0')
if field(last, 'closed') then return {'closed', stored_end, field(last, 'cid')} end
"""
)

# KEYS[1]: catalog/<id>
# ARGV[1]: offset, ARGV[2]: text (cleaned), ARGV[3]: end (offset + length as sent),
# ARGV[4]: the most characters the text may reach, ARGV[5]: '1' to flush after it
# Appends the fragment when it starts exactly at the end; a fragment wholly before the end is a
# resend (nothing appended); one past the end leaves a gap and one across it overlaps: refused.
# Returns {answer, end}: ok, duplicate, gap, overlap, too_long, closed, missing, not_live.
FRAGMENT = (
    _STATE
    + """
local offset, new_end = tonumber(ARGV[1]), tonumber(ARGV[3])
if offset > stored_end then return {'gap', stored_end} end
if new_end < stored_end or (new_end == stored_end and offset < stored_end) then
  return {'duplicate', stored_end}
end
if offset < stored_end then return {'overlap', stored_end} end
if new_end > tonumber(ARGV[4]) then return {'too_long', stored_end} end
if new_end > offset then
  redis.call('XADD', KEYS[1], '*', 't', ARGV[2], 'o', offset, 'end', new_end)
end
if ARGV[5] == '1' and not (field(last, 'flush') and tonumber(field(last, 'end')) == new_end) then
  redis.call('XADD', KEYS[1], '*', 'flush', '1', 'end', new_end)
end
return {'ok', new_end}
"""
)

# KEYS[1]: catalog/<id>
# ARGV[1]: the end the closer saw (its text's length), ARGV[2]: the final text's content id
# Closes the text if nothing was appended since the closer read it. Returns {answer, end, cid}:
# ok, closed (already; its cid), moved (a fragment came in meanwhile), missing, not_live.
CLOSE = (
    _STATE
    + """
if tonumber(ARGV[1]) ~= stored_end then return {'moved', stored_end} end
redis.call('XADD', KEYS[1], '*', 'closed', '1', 'end', stored_end, 'cid', ARGV[2])
return {'ok', stored_end, ARGV[2]}
"""
)

FragmentAnswer = Literal["ok", "duplicate", "gap", "overlap", "too_long", "closed", "missing", "not_live"]
CloseAnswer = Literal["ok", "closed", "moved", "missing", "not_live"]
WriterAnswer = Literal["ok", "forbidden", "missing", "not_live"]


def open_cast_id() -> str:
    """A random id in the content ids' format (12 URL-safe characters), never a content hash."""
    return secrets.token_urlsafe(9)


def write_token() -> str:
    """A fresh secret that lets its holder write to one open cast."""
    return secrets.token_urlsafe(WRITE_TOKEN_BYTES)


def client_tag(client: str, key: bytes = b"") -> str:
    """What synth learns of an open cast's opener: an opaque tag (16 hex characters of SHA-256,
    HMAC under the deployment's content key when there is one), the same for every cast the
    client opens, so the worker can serve open casts round robin by client without holding an address."""
    data = b"client\x00" + client.encode("utf-8", "surrogatepass")
    digest = hmac.new(key, data, hashlib.sha256) if key else hashlib.sha256(data)
    return digest.hexdigest()[:CLIENT_TAG_CHARS]


def write_hash(token: str) -> str:
    """What Redis keeps of a write token (hex SHA-256): a leaked catalog leaks no token."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class OpenedCast:
    """An open cast as its opener learns it: the id (public) and the write token (secret)."""

    cast_id: str
    write_token: str


@dataclass(frozen=True)
class TextEvent:
    """One entry of an open cast's text log after its recipe."""

    entry_id: str
    kind: Literal["text", "flush", "closed"]
    end: int
    text: str = ""
    cid: str = ""


@dataclass(frozen=True)
class LiveText:
    """An open cast's text as its catalog holds it (``client``: its opener's tag, '' when the
    cast was opened without one)."""

    voice: str
    speed: float
    events: list[TextEvent]
    client: str = ""

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events)

    @property
    def end(self) -> int:
        return self.events[-1].end if self.events else 0

    @property
    def closed(self) -> TextEvent | None:
        return next((e for e in self.events if e.kind == "closed"), None)


def text_event(entry_id: bytes | str, fields: dict[bytes, bytes]) -> TextEvent | None:
    """The event of one catalog entry; None for the recipe and entries of other kinds."""
    eid = keys.decoded(entry_id)
    end = int(fields.get(b"end", b"0"))
    if b"t" in fields:
        return TextEvent(eid, "text", end, fields[b"t"].decode())
    if b"flush" in fields:
        return TextEvent(eid, "flush", end)
    if b"closed" in fields:
        return TextEvent(eid, "closed", end, cid=fields.get(b"cid", b"").decode())
    return None


def text_events(rows: Rows) -> list[TextEvent]:
    return [e for e in (text_event(i, f) for i, f in rows) if e is not None]


class LiveStore:
    """Open, feed and close open casts (one per process, like :class:`castlog.CastStore`)."""

    def __init__(self, redis: Redis, content_key: bytes = b"", *, replicas: int = 0, wait_ms: int = 0) -> None:
        """``replicas`` > 0: an open is answered only once its writes reached that many replicas
        (WAIT, up to ``wait_ms``); else it raises batching.NotReplicated (the place it took among
        its client's open casts given back)."""
        self.redis = redis
        self.content_key = content_key  # the deployment's key of content ids (ids.content_id)
        self._open = ScriptBatcher(redis, OPEN, replicas=replicas, wait_ms=wait_ms)
        self.bell = Bell(redis)  # on a cluster: the movers' bell after each new job
        self._fragment = redis.register_script(FRAGMENT)
        self.cap = OpenCap(redis)
        self._close = redis.register_script(CLOSE)

    async def open(
        self, voice: str, meta: Meta, *, speed: float = 1.0, limit: tuple[RateLimiter, str] | None = None,
        max_open: int = 0,
    ) -> OpenedCast:
        """Claim a fresh random id for an open cast: recipe (with the hash of a fresh write
        token and the opener's :func:`client_tag`), ``meta`` and its job in one step;
        :class:`TooManyOpen` when the client (``limit``'s) holds ``max_open`` casts whose text
        is open (0: no cap)."""
        token = write_token()
        client, capped = "", False
        tag = client_tag(limit[1], self.content_key) if limit is not None else ""
        if limit is not None:  # its own step: a client's bucket and a cast's lane are different slots
            limiter, client = limit
            verdict = await limiter.take(client)
            if not verdict.allowed:
                raise RateLimited(verdict)
            capped = max_open > 0
        for _ in range(OPEN_ID_TRIES):
            cast_id = open_cast_id()
            if capped and not await self.cap.reserve(client, cast_id, max_open):
                raise TooManyOpen(f"{client} holds {max_open} open casts")
            open_keys = [keys.cast_key(cast_id), keys.catalog_key(cast_id), keys.lane_live_jobs_of(cast_id)]
            args: list[str | bytes] = [cast_id, voice, meta.title, encode_headers(meta), repr(speed), write_hash(token),
                                       tag]
            answer = ""
            try:
                answer = keys.decoded(await self._open(keys=open_keys, args=args))
            except NotReplicated as unconfirmed:  # its job stands all the same: ring for it
                if keys.decoded(unconfirmed.answer) == "new":
                    await self.bell.ring(open_keys[2])
                raise
            finally:
                if capped and answer != "new":  # an open that did not happen holds no place
                    await self.cap.give_back(client, cast_id)
            if answer == "new":
                await self.bell.ring(open_keys[2])
                return OpenedCast(cast_id, token)
        raise RuntimeError(f"no free cast id after {OPEN_ID_TRIES} random tries")

    async def writer(self, cast_id: str, token: str) -> WriterAnswer:
        """Whether ``token`` may write to ``cast_id`` (one short read: the recipe). A cast opened
        before write tokens existed has no hash, so no token writes to it (it idles out)."""
        recipe = await read_recipe(self.redis, cast_id)
        if recipe is None:
            return "missing"
        if not recipe.live:
            return "not_live"
        ok = hmac.compare_digest(write_hash(token), recipe.wh) and bool(recipe.wh)
        return "ok" if ok else "forbidden"

    async def append_text(
        self, cast_id: str, offset: int, raw_length: int, text: str, *, max_chars: int, flush: bool = False,
        limit: tuple[RateLimiter, str, int] | None = None,
    ) -> tuple[FragmentAnswer, int]:
        """Add a fragment of ``raw_length`` characters as sent (``text`` is what is kept of it)
        at ``offset``; returns the answer and the text's end after it. With ``limit`` (a bucket,
        the client, the cost) the cost is taken first, or :class:`RateLimited`."""
        if limit is not None:  # its own step: the writer's bucket is not in the cast's lane
            limiter, client, cost = limit
            verdict = await limiter.take(client, cost)
            if not verdict.allowed:
                raise RateLimited(verdict)
        args: list[str | int | float] = [offset, text, offset + raw_length, max_chars, "1" if flush else "0"]
        answer, end = (await self._fragment(keys=[keys.catalog_key(cast_id)], args=args))[:2]
        return cast(FragmentAnswer, keys.decoded(answer)), int(end)

    async def close(self, cast_id: str, seen_end: int, cid: str) -> tuple[CloseAnswer, int, str]:
        reply = await self._close(keys=[keys.catalog_key(cast_id)], args=[seen_end, cid])
        stored_cid = keys.decoded(reply[2]) if len(reply) > 2 and reply[2] is not None else ""
        return cast(CloseAnswer, keys.decoded(reply[0])), int(reply[1]), stored_cid

    async def read_text(self, cast_id: str) -> LiveText | None:
        """The whole text log of an open cast; None when ``cast_id`` is no open cast."""
        rows = cast(Rows, await self.redis.xrange(keys.catalog_key(cast_id)))
        recipe = decode_or_none(Recipe, rows[0][1]) if rows else None
        if recipe is None or not recipe.live:
            return None
        return LiveText(voice=recipe.voice, speed=recipe.speed, events=text_events(rows[1:]), client=recipe.client)

    async def close_text(self, cast_id: str, voice: str, seen: LiveText | None = None) -> tuple[CloseAnswer, int, str]:
        """Close with the content id of the text as it stands, re-reading when a fragment lands
        between the read and the close (``seen``: the text the caller just read, read no more)."""
        while True:
            live, seen = seen if seen is not None else await self.read_text(cast_id), None
            if live is None:
                exists = await self.redis.exists(keys.catalog_key(cast_id))
                return ("not_live" if exists else "missing"), 0, ""
            answer, end, cid = await self.close(cast_id, live.end, content_id(live.text, voice, key=self.content_key))
            if answer != "moved":
                return answer, end, cid
