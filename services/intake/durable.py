"""The write side of the Durable Streams protocol under ``/v1/stream/<path>``: create (PUT, forks
included), append and close (POST), delete. Parse, call ``durablestreams``, answer; reads are
edge's (``edge/durable.py``). The API keys' check covers these routes like every ``/v1/*`` one.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone
from typing import Annotated

import msgspec
from aiohttp import web

from castlog.keys import id_order
from durablestreams import protocol as ds
from durablestreams.scripts import MAX_EPOCH_STEP
from durablestreams.streams import (
    MAX_FORK_DEPTH,
    OCTET_STREAM,
    STREAM_TYPES,
    BadJson,
    DurableStreams,
    Meta,
    Outcome,
    Spec,
    entry_of,
    is_json,
    json_entry,
    json_messages,
    normal_type,
    passive_type,
    valid_path,
)
from servicekit import Refusal

from .claim import bearer, read_body
from .context import CONFIG, INTAKE, request_client

_MEDIA_TYPE = re.compile(r"[\w.+-]+/[\w.+-]+")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
# A time with its offset, read by msgspec: Python 3.10's fromisoformat takes neither `Z` nor 9 fraction digits.
ZONED = Annotated[datetime, msgspec.Meta(tz=True)]
# Producer epochs and sequence numbers stay exact in JavaScript's numbers.
MAX_SAFE_INTEGER = 2**53 - 1
# A stream's deadline (ms) stays an exact integer in Lua's doubles (below 2^53) however long it
# slides: some 31,000 years.
MAX_TTL_S = 10**12
# Producer-Id and Stream-Seq are kept with the stream but not counted in its bytes: bounded so
# that an append of one byte cannot store kilobytes of header beside it.
MAX_TOKEN_CHARS = 256
READ_ONLY = {"Allow": "GET, HEAD"}
# An owner's name from its API key: the key's SHA-256, this many hex digits (Redis never holds a key).
KEY_OWNER_DIGITS = 32


def setup(app: web.Application) -> None:
    """Routes and the security headers (the store is ``Intake.durable``)."""
    app.on_response_prepare.append(ds.secure)
    app.router.add_put(ds.ROUTE, create)
    app.router.add_post(ds.ROUTE, append)
    app.router.add_delete(ds.ROUTE, delete)


async def _peek_quota(request: web.Request, creating: bool) -> None:
    """With no API keys: refused before the body is read if the client's quota cannot pay [R:ds-quota]."""
    quota = request.app[INTAKE].ds_quota
    if quota is not None:
        await quota.peek(request_client(request), creating=creating, declared_bytes=request.content_length)


async def _take_quota(request: web.Request, creating: bool, entries: list[bytes]) -> None:
    quota = request.app[INTAKE].ds_quota
    if quota is not None:
        await quota.take(request_client(request), creating=creating, size=sum(len(e) for e in entries))


def stream_owner(request: web.Request) -> str:
    """Who a write comes from, the one name a stream's owner is compared with [R:ds-owners]: the
    API key's hash while keys are set (the auth middleware let only a key's holder through), else
    the client's address (the same as its quota's), the one thing the protocol's clients carry
    on every request without being told."""
    if request.app[CONFIG].api_keys:
        token = bearer(request, ("bearer", "token"))
        return "key:" + hashlib.sha256(token.encode()).hexdigest()[:KEY_OWNER_DIGITS]
    return "addr:" + request_client(request)


def not_owner() -> Refusal:
    return Refusal(403, "not_owner", "this stream is another client's: only its creator (the same API key; without "
                   "keys, the same address) writes, closes, deletes or forks it; create your own at another path")


def _writable(request: web.Request) -> str:
    path = ds.stream_path(request)
    if ds.is_cast(path):
        raise Refusal(405, "read_only", "casts are read-only durable streams", READ_ONLY)  # [R:ds-casts-read-only]
    return path


def _decimal(request: web.Request, name: str, most: int) -> int | None:
    value = request.headers.get(name)
    if value is None:
        return None
    if not _DECIMAL.fullmatch(value):
        raise ds.bad(f"{name} must be a non-negative decimal integer without sign or leading zeros")
    if len(value) > len(str(most)) or int(value) > most:  # the length first: int() of 5,000 digits raises
        raise ds.bad(f"{name} is at most {most}")
    return int(value)


def _deadline_ms(expires_at: str) -> int:
    if not _RFC3339.fullmatch(expires_at):
        raise ds.bad(f"{ds.EXPIRES_AT} must be an RFC 3339 timestamp")
    try:
        return int(msgspec.convert(expires_at, ZONED).astimezone(timezone.utc).timestamp() * 1000)
    except (msgspec.ValidationError, OverflowError):  # OverflowError: shifted to UTC before year 1
        raise ds.bad(f"{ds.EXPIRES_AT} is not a real time") from None


async def create(request: web.Request) -> web.Response:
    """PUT: create, or confirm an identical stream (200); a different one is a conflict [R:ds-create]."""
    path = _writable(request)
    streams = request.app[INTAKE].durable
    source = request.headers.get(ds.FORKED_FROM)
    given = request.headers.get("Content-Type", "").strip()
    content_type: str | None = given if _MEDIA_TYPE.match(given) else None
    if content_type is not None and not passive_type(content_type):
        raise _active_type(content_type)
    ttl = _decimal(request, ds.TTL, MAX_TTL_S)
    expires_at = request.headers.get(ds.EXPIRES_AT)
    if ttl is not None and expires_at is not None:
        raise ds.bad(f"send {ds.TTL} or {ds.EXPIRES_AT}, not both")
    deadline = _deadline_ms(expires_at) if expires_at is not None else None
    fork_offset = request.headers.get(ds.FORK_OFFSET)
    fork_at = entry_of(fork_offset) if fork_offset else None
    if fork_offset and fork_at is None:
        raise ds.bad(f"{ds.FORK_OFFSET} is not an offset of this server")
    sub = _decimal(request, ds.FORK_SUB_OFFSET, MAX_SAFE_INTEGER)
    if ds.FORK_SUB_OFFSET in request.headers and source is None:
        raise ds.bad(f"{ds.FORK_SUB_OFFSET} needs {ds.FORKED_FROM}")
    await _peek_quota(request, creating=True)
    body = await read_body(request)  # INTAKE_MAX_BODY_BYTES within INTAKE_BODY_TIMEOUT_S
    closed = ds.flag(request, ds.CLOSED)
    prefix: list[bytes] = []
    spec = Spec(content_type or OCTET_STREAM, ttl, expires_at, deadline, closed, owner=stream_owner(request))
    if source is not None:
        spec, prefix = await _fork_spec(streams, spec, content_type, source, fork_at, sub or 0)
    try:
        entries = prefix + _entries(spec.content_type, body, creating=True)
    except BadJson as exc:
        raise ds.bad(str(exc)) from None
    await _take_quota(request, True, entries)
    outcome = await streams.create(path, spec, entries)
    if outcome.status == "created":
        meta = outcome.meta
        assert meta is not None
        headers = ds.state_headers(meta.content_type, meta.tail_offset, meta.closed)
        headers["Location"] = ds.public_url(request)
        return web.Response(status=201, headers=headers)
    if outcome.status == "exists":
        assert outcome.meta is not None
        if outcome.meta.owner != spec.owner:
            raise not_owner()
        if not _same(outcome.meta, spec, fork_at):
            raise Refusal(409, "conflict", "a stream with another configuration is at this path")
        meta = outcome.meta
        return web.Response(status=200, headers=ds.state_headers(meta.content_type, meta.tail_offset, meta.closed))
    if outcome.status == "nosrc":
        raise Refusal(404, "not_found", "no such source stream")
    if outcome.status == "not_owner":
        raise not_owner()
    if outcome.status == "too_big":
        raise _too_big(request)
    if outcome.status == "elsewhere":
        raise Refusal(409, "conflict", "this path was a fork of another family of streams; fork to another path")
    if outcome.status == "too_deep":
        raise ds.bad(f"a fork of a fork is at most {MAX_FORK_DEPTH} deep")
    raise Refusal(409, "conflict", "a deleted stream that forks still read holds this path (or the source)")


def _active_type(content_type: str) -> Refusal:
    """415 for a type a browser could render or run from this origin [R:ds-passive-types]."""
    return Refusal(415, "unsupported_type", f"a stream's Content-Type is one of {', '.join(sorted(STREAM_TYPES))} "
                   f"(parameters as plain name=value tokens); {normal_type(content_type)!r} is not: send one of "
                   "them, application/octet-stream for any other bytes")


def _entries(content_type: str, body: bytes, *, creating: bool) -> list[bytes]:
    """A write's body as the entries it stores: none, the bytes, or its JSON messages (BadJson)."""
    if not body:
        return []
    if not is_json(content_type):
        return [body]
    entry = json_entry(body, creating=creating)
    return [entry] if entry is not None else []


async def _fork_spec(
    streams: DurableStreams, spec: Spec, content_type: str | None, source: str, fork_at: str | None, sub: int
) -> tuple[Spec, list[bytes]]:
    """A fork's spec from its source's meta, and its own first entry when a sub-offset cuts into
    the source's next entry [R:ds-fork]."""
    name = source[len(ds.PREFIX):] if source.startswith(ds.PREFIX) else source.lstrip("/")
    if not valid_path(name):
        raise Refusal(404, "not_found", "no such source stream")
    found = await streams.open(name, touch=False)
    if found.status == "gone":
        raise Refusal(409, "conflict", "the source stream was deleted")
    if found.meta is None:
        raise Refusal(404, "not_found", "no such source stream")
    src = found.meta
    if src.owner != spec.owner:  # a fork holds its source (and its name) while it lives: the owner's call
        raise not_owner()
    if content_type is not None and normal_type(content_type) != normal_type(src.content_type):
        raise Refusal(409, "conflict", "a fork has its source's content type")
    at = fork_at or src.tail
    if id_order(at) > id_order(src.tail):
        raise ds.bad(f"{ds.FORK_OFFSET} is beyond the source's tail")
    prefix: list[bytes] = []
    if sub:
        prefix = [await _cut(streams, src, at, sub)]
    ttl, expires_at, deadline = spec.ttl, spec.expires_at, spec.deadline_ms
    if ttl is None and expires_at is None:  # the protocol's table: inherit the source's expiry
        ttl = src.ttl
        if src.expires_at is not None:
            expires_at, deadline = src.expires_at, _deadline_ms(src.expires_at)
    return Spec(src.content_type, ttl, expires_at, deadline, spec.closed, name, at, sub, spec.owner), prefix


async def _cut(streams: DurableStreams, src: Meta, at: str, sub: int) -> bytes:
    first = await streams.first_after(src, at)
    if first is None:
        raise ds.bad(f"{ds.FORK_SUB_OFFSET} points past the source's data")
    if is_json(src.content_type):
        messages = json_messages(first)
        if sub > len(messages):
            raise ds.bad(f"{ds.FORK_SUB_OFFSET} is past the next append's messages")
        return b",".join(messages[:sub])
    if sub > len(first):
        raise ds.bad(f"{ds.FORK_SUB_OFFSET} is past the next append's bytes")
    return first[:sub]


def _same(meta: Meta, spec: Spec, fork_at: str | None) -> bool:
    return (
        normal_type(meta.content_type) == normal_type(spec.content_type) and meta.ttl == spec.ttl
        and meta.expires_at == spec.expires_at and meta.closed == spec.closed and meta.source == spec.source
        and (fork_at is None or meta.fork_at == fork_at) and meta.fork_sub == spec.fork_sub
    )


def _producer(request: web.Request) -> tuple[str, int, int] | None:
    if all(request.headers.get(n) is None for n in (ds.PRODUCER_ID, ds.PRODUCER_EPOCH, ds.PRODUCER_SEQ)):
        return None
    pid = request.headers.get(ds.PRODUCER_ID)
    epoch = _decimal(request, ds.PRODUCER_EPOCH, MAX_SAFE_INTEGER)
    seq = _decimal(request, ds.PRODUCER_SEQ, MAX_SAFE_INTEGER)
    if pid is None or epoch is None or seq is None:
        raise ds.bad("send Producer-Id, Producer-Epoch and Producer-Seq together")
    if not pid or len(pid) > MAX_TOKEN_CHARS:
        raise ds.bad(f"Producer-Id must have 1 to {MAX_TOKEN_CHARS} characters")
    return pid, epoch, seq


async def append(request: web.Request) -> web.Response:
    """POST: append (and close with ``Stream-Closed: true``), idempotent per producer
    [R:ds-append] [R:ds-producer] [R:ds-close]."""
    path = _writable(request)
    streams = request.app[INTAKE].durable
    closing = ds.flag(request, ds.CLOSED)
    producer = _producer(request)
    owner = stream_owner(request)
    stream_seq = request.headers.get(ds.SEQ)
    if stream_seq is not None and len(stream_seq) > MAX_TOKEN_CHARS:
        raise ds.bad(f"{ds.SEQ} has at most {MAX_TOKEN_CHARS} characters")
    await _peek_quota(request, creating=False)
    body = await read_body(request)  # INTAKE_MAX_BODY_BYTES within INTAKE_BODY_TIMEOUT_S
    if not body and not closing:
        raise ds.bad("an append needs a body (or Stream-Closed: true to close)")
    content_type = request.headers.get("Content-Type", "")
    if body and not content_type:
        raise ds.bad("an append needs a Content-Type")
    try:
        entries = _entries(content_type, body, creating=False)
    except BadJson as exc:
        await _refuse_state_first(streams, path, content_type, owner)
        raise ds.bad(str(exc)) from None
    await _take_quota(request, False, entries)
    outcome = await streams.append(path, content_type, entries, owner=owner, stream_seq=stream_seq,
                                   producer=producer, close=closing)
    if outcome.status == "too_big":
        raise _too_big(request)
    return _answer(outcome, producer, bool(entries))


def _too_big(request: web.Request) -> Refusal:
    limit = request.app[CONFIG].ds_max_stream_bytes
    return Refusal(413, "stream_full", f"a stream holds at most {limit} bytes (INTAKE_DS_MAX_STREAM_BYTES)")


async def _refuse_state_first(streams: DurableStreams, path: str, content_type: str, owner: str) -> None:
    """A bad JSON body on a stream that is another's, closed or of another type: those answers come first."""
    found = await streams.open(path, touch=False)
    if found.meta is None:
        raise ds.gone() if found.status == "gone" else ds.missing()
    if found.meta.owner != owner:
        raise not_owner()
    if found.meta.closed:
        raise _closed(found.meta)
    if normal_type(content_type) != normal_type(found.meta.content_type):
        raise Refusal(409, "conflict", "the stream has another content type")


def _closed(meta: Meta) -> Refusal:
    return Refusal(409, "closed", "the stream is closed", {ds.CLOSED: "true", ds.NEXT_OFFSET: meta.tail_offset})


def _answer(outcome: Outcome, producer: tuple[str, int, int] | None, appended: bool) -> web.Response:
    status, meta = outcome.status, outcome.meta
    if meta is None:
        raise ds.gone() if status == "gone" else ds.missing()
    if status == "not_owner":
        raise not_owner()
    headers = {ds.NEXT_OFFSET: meta.tail_offset}
    if meta.closed:
        headers[ds.CLOSED] = "true"
    if status == "ok":
        if producer is not None:
            headers[ds.PRODUCER_EPOCH], headers[ds.PRODUCER_SEQ] = str(producer[1]), str(producer[2])
        return web.Response(status=200 if producer is not None and appended else 204, headers=headers)
    if status == "duplicate":
        assert producer is not None
        headers[ds.PRODUCER_EPOCH], headers[ds.PRODUCER_SEQ] = str(producer[1]), outcome.detail[0]
        return web.Response(status=204, headers=headers)
    if status == "closed":
        raise _closed(meta)
    if status == "stale_epoch":
        raise Refusal(403, "stale_epoch", "a newer epoch of this producer writes now",
                      {ds.PRODUCER_EPOCH: outcome.detail[0]})
    if status == "gap":
        raise Refusal(409, "sequence_gap", "a producer sequence number is missing",
                      {ds.PRODUCER_EXPECTED_SEQ: outcome.detail[0], ds.PRODUCER_RECEIVED_SEQ: outcome.detail[1]})
    if status == "epoch_jump":
        raise ds.bad(f"{ds.PRODUCER_EPOCH} grows by at most {MAX_EPOCH_STEP} at a time (a new producer starts at "
                     f"most that high); the current one is {outcome.detail[0]}")
    if status == "epoch_seq":
        raise ds.bad("a new producer epoch starts at Producer-Seq 0")
    if status == "seq_conflict":
        raise Refusal(409, "sequence_conflict", "Stream-Seq must grow with every append")
    raise Refusal(409, "conflict", "the stream has another content type")


async def delete(request: web.Request) -> web.Response:
    """DELETE: gone now, or soft-deleted while forks read it [R:ds-delete]."""
    status = await request.app[INTAKE].durable.delete(_writable(request), stream_owner(request))
    if status == "not_owner":
        raise not_owner()
    if status == "missing":
        raise ds.missing()
    if status == "gone":
        raise ds.gone()
    return web.Response(status=204)

