"""The claim path every submit takes, whatever its route: the screen, the body, one atomic submit.

``async with Screen(request) as client:`` turns away a client still cooling down, holds a permit
of the in-flight gate, turns away a client whose bucket is empty (a peek, before any body is
read: #21) and counts every refusal raised inside by its code; in it a route reads
the body (``read_body``), parses it its own way and hands the form to ``submit``, which checks
it and claims the cast in one Redis round trip: a ``Claimed``, or a ``Refusal``. The speech
room's ``/v1/audio/speech`` walks the same path with OpenAI's body.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from aiohttp import web

from castlog import Meta, RateLimited, SubmitResult, client_tag, content_id
from castlog.batching import NotReplicated
from servicekit.keys import bearer, key_matches

from .context import INTAKE, request_client
from .validate import CastForm, Refusal, check


@dataclass(frozen=True)
class Claimed:
    """A submit that went through: the cast and what the claim found (new, existing, reenqueued)."""

    cast_id: str
    result: SubmitResult


def cast_url(cast_id: str) -> str:
    """The cast's player: every answer that names a cast links it."""
    return f"/c/{cast_id}"


def not_replicated(replicas: int, retry: str) -> Refusal:
    """A write that ran but was not seen on ``replicas`` Redis replicas within the wait: not
    acknowledged (INTAKE_WAIT_REPLICAS), so a master's failover cannot lose an answered cast."""
    return Refusal(503, "busy", f"the cast was not confirmed by {replicas} Redis replica(s) in time; retry ({retry})",
                   {"Retry-After": "1"})


def rate_limited(wait_s: int) -> Refusal:
    return Refusal(429, "rate_limited", f"too many submissions; retry in {wait_s} s", {"Retry-After": str(wait_s)})


class Screen:
    """The cooldown, then a permit of the in-flight gate while the body is read and submitted; a
    ``Refusal`` at the door or inside is counted by its code (a plain class, not a generator-based
    context manager: it is on every submit's path)."""

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self._intake = request.app[INTAKE]

    async def __aenter__(self) -> str:
        """The client's address, once it may go on."""
        intake, request = self._intake, self._request
        try:
            client = request_client(request)
            wait = intake.cooldowns.wait_s(client)
            if wait:
                raise rate_limited(wait)  # refused a moment ago: not worth reading the body for
            await intake.gate.acquire()
            try:
                await self._bucket_holds_a_token(client)
            except BaseException:
                intake.gate.release()
                raise
        except Refusal as refusal:
            intake.metrics.refused(refusal.code)
            raise
        return client

    async def _bucket_holds_a_token(self, client: str) -> None:
        """The rate limit, checked before the body is read (a peek: the token is taken with the
        write, so a refused submit spends none)."""
        intake = self._intake
        asked_at = intake.cooldowns.clock()
        verdict = await intake.limiter.peek(client)
        if not verdict.allowed:
            intake.cooldowns.refused(client, asked_at, verdict)
            raise rate_limited(verdict.retry_after_s)

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self._intake.gate.release()
        if isinstance(exc, Refusal):
            self._intake.metrics.refused(exc.code)


async def read_body(request: web.Request) -> bytes:
    """The body, at most INTAKE_MAX_BODY_BYTES (aiohttp's client_max_size is set to the same),
    within INTAKE_BODY_TIMEOUT_S: a body trickled in a byte at a time holds nothing for long."""
    cfg = request.app[INTAKE].cfg
    limit = cfg.max_body_bytes
    if request.content_length is None or request.content_length <= limit:
        try:
            return await asyncio.wait_for(request.read(), cfg.body_timeout_s)
        except asyncio.TimeoutError:
            raise Refusal(408, "body_timeout", f"the body took longer than {cfg.body_timeout_s:g} s to arrive; "
                          "send it at once", {"Connection": "close"}) from None
        except web.HTTPRequestEntityTooLarge:
            pass  # a chunked body ran past client_max_size
    raise Refusal(413, "body_too_large", f"the body is larger than {limit} bytes; send a shorter text")


def tenant_key(request: web.Request) -> str | None:
    """The key of STREAMTTS_API_KEYS the request carries (Bearer, or Deepgram's Token), if any."""
    key = bearer(request, ("bearer", "token"))
    return key if key_matches(key, request.app[INTAKE].cfg.api_keys) else None


def request_tag(request: web.Request, client: str) -> str:
    """Who the request is, as an opaque tag: with API keys its key's tenant (a key's holder may
    send from many addresses), else its client address. A submit records it: workers admit
    tags in turn, a key cancels only its own casts, /v1/audio/voices lists only its blends."""
    key, content_key = tenant_key(request), request.app[INTAKE].cfg.content_key.encode()
    return key_tag(key, content_key) if key is not None else client_tag(client, content_key)


def key_tag(key: str, content_key: bytes) -> str:
    """An API key's tenant, as an opaque tag."""
    return client_tag(f"key\x00{key}", content_key)


def cache_key(content_key: bytes, tenant: str | None) -> bytes:
    """The key content ids are made under: the deployment's STREAMTTS_CONTENT_KEY, and with API
    keys set the tenant's tag (:func:`key_tag`) too, so that each tenant has a cache of its own:
    submitting a guessed text answers `existing` only for a text the same tenant cast (another
    tenant's cast, its title and time, stay unknown to it)."""
    return content_key + b"\x00tenant\x00" + tenant.encode() if tenant is not None else content_key


async def submit(request: web.Request, client: str, form: CastForm) -> Claimed:
    """Validate, then take the token and write in one atomic step; the histogram covers this.
    The job and recipe carry the submitter's :func:`request_tag`."""
    intake = request.app[INTAKE]
    tag = request_tag(request, client)
    cfg = intake.cfg
    started = time.perf_counter()
    voices = await intake.voices.required(form.voice)
    sub = check(form, voices.names, voices.default, cfg.max_chars, cfg.max_title_chars)
    tenant = tag if tenant_key(request) is not None else None
    cast_id = content_id(sub.text, sub.voice, sub.speed, key=cache_key(cfg.content_key.encode(), tenant))
    sentences = await intake.planner.sentences(cast_id, sub.text)
    if sentences == 0:
        raise Refusal(422, "empty_text", "the text has nothing to read out; send some words")
    now_ms = time.time_ns() // 1_000_000
    meta = Meta(
        title=sub.title, voice=sub.voice, chars=len(sub.text), sentences=sentences, created_at=now_ms, speed=sub.speed
    )
    asked_at = intake.cooldowns.clock()
    try:
        result = await intake.store.submit(cast_id, sub.text, sub.voice, meta, limit=(intake.limiter, client), client=tag)
    except RateLimited as limited:
        intake.cooldowns.refused(client, asked_at, limited.verdict)
        raise rate_limited(limited.verdict.retry_after_s) from None
    except NotReplicated:  # written, but not known to survive a failover: not acknowledged
        raise not_replicated(cfg.wait_replicas, "the same text is the same cast") from None
    intake.metrics.submitted(result, time.perf_counter() - started)
    return Claimed(cast_id, result)
