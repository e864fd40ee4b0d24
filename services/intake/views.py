"""HTTP handlers: parse, call, respond. Refusals are raised as `Refusal`; the app's middleware
turns them into JSON answers (4xx, or 503 when intake sheds load)."""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiohttp import web

from castlog import Meta, RateLimited, SubmitResult, archive, content_id, is_cast_id
from servicekit import Problem, client_address, json_response, probe, redis_answers

from . import live, v1
from .context import INTAKE, OPENAPI, Intake
from .validate import BodyKind, CastForm, Limits, Refusal, body_kind, check, parse_form, parse_json
from .voices import warming_up

STATUS_OF: dict[str, int] = {"new": 201, "existing": 200, "reenqueued": 202}

encode = msgspec.json.Encoder().encode


def cast_url(cast_id: str) -> str:
    return f"/c/{cast_id}"


async def post_cast(request: web.Request) -> web.Response:
    """POST /api/casts: JSON in, the cast's link out (or, with "live": true, an open cast)."""
    try:
        cast_id, result, _ = await _accept(request, allow_form=False)
    except live.OpenedInstead as opened:
        return opened.response
    return _cast_reply(cast_id, result)


async def post_generate(request: web.Request) -> web.Response:
    """POST /generate: the paste form (303 to the cast) or JSON (as POST /api/casts)."""
    cast_id, result, kind = await _accept(request, allow_form=True)
    if kind is BodyKind.FORM:
        return web.Response(status=303, headers={"Location": cast_url(cast_id)})
    return _cast_reply(cast_id, result)


async def get_voices(request: web.Request) -> web.Response:
    voices = await request.app[INTAKE].voices.current()
    if voices is None:
        raise warming_up()
    return json_response(voices.to_json())


async def get_v1_voices(request: web.Request) -> web.Response:
    """Open WebUI's and Kokoro-FastAPI's shape: ``{"voices": [{"id", "name"}]}``."""
    voices = await request.app[INTAKE].voices.required(None)  # 503 warming_up before any worker published
    return json_response({"voices": v1.voice_list(voices.names), "default": voices.default})


async def get_v1_audio_models(request: web.Request) -> web.Response:
    return json_response({"models": [{"id": m} for m in v1.MODELS]})


async def get_v1_models(request: web.Request) -> web.Response:
    return json_response(v1.model_list())


async def get_v1_model(request: web.Request) -> web.Response:
    model = request.match_info["model"]
    if model not in v1.MODELS:
        raise v1.V1Refusal(404, "model_not_found", f"no such model; use one of {', '.join(v1.MODELS)}", "model")
    return json_response(v1.model_card(model))


async def get_openapi(request: web.Request) -> web.Response:
    """The public origin's one document: intake's routes and edge's (servicekit.openapi)."""
    return web.Response(body=request.app[OPENAPI], content_type="application/json")


async def delete_cast(request: web.Request) -> web.Response:
    """DELETE /api/casts/{id} (admin): the log, the catalog and the claim go in one step, the
    archived audio after it; an identical submit then synthesizes again. 404 unless the
    request carries ``Authorization: Bearer $STREAMTTS_ADMIN_TOKEN`` (and one is configured),
    so that the route does not even show that it exists."""
    token = request.app[INTAKE].cfg.admin_token
    given = request.headers.get("Authorization", "")
    if token is None or not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        raise Refusal(404, "not_found", "no such route")
    cast_id = request.match_info["id"]
    if not is_cast_id(cast_id) or not await archive.delete(request.app[INTAKE].redis, cast_id):
        raise Refusal(404, "not_found", "no such cast")
    return json_response({"id": cast_id, "deleted": True})


_REDIS_ANSWERS = redis_answers(
    lambda app: app[INTAKE].redis, Problem("unavailable", "Redis does not answer; check REDIS_URL and the Redis server")
)


async def _published(app: web.Application) -> dict[str, Any]:
    voices = await app[INTAKE].voices.current()
    return {"voices": len(voices.names) if voices else None, "default": voices.default if voices else None}


get_healthz = probe(_REDIS_ANSWERS)
# Ready to take submits: Redis answers. The body says whether a worker's voices are published
# (a submit before that is answered 503 warming_up); the local origin's /readyz waits for both.
get_readyz = probe(_REDIS_ANSWERS, info=_published)


def _cast_reply(cast_id: str, result: SubmitResult) -> web.Response:
    url = cast_url(cast_id)
    return json_response(
        {"id": cast_id, "url": url, "status": result}, status=STATUS_OF[result], headers={"Location": url}
    )


async def _accept(request: web.Request, *, allow_form: bool) -> tuple[str, SubmitResult, BodyKind]:
    """Read, check and submit one cast, its client's token taken in the same Redis round trip.

    A request refused before that round trip touches no key and spends no token; every refusal
    is counted by its code.
    """
    kind = BodyKind.JSON

    def parse(body: bytes) -> CastForm:
        return parse_json(body) if kind is BodyKind.JSON else parse_form(body)

    async def read() -> bytes:
        nonlocal kind
        kind = body_kind(request.content_type, request.charset, allow_form=allow_form)
        body = await read_body(request)
        if kind is BodyKind.JSON and live.asks_live(body):
            raise live.OpenedInstead(await live.open_from_body(request, body))
        return body

    cast_id, result = await accept(request, read, parse)
    return cast_id, result, kind


async def accept(
    request: web.Request, read: Callable[[], Awaitable[bytes]], parse: Callable[[bytes], CastForm]
) -> tuple[str, SubmitResult]:
    """The submit of any route: cooldown, the in-flight gate, ``read`` the body, ``parse`` it into
    a form, then check and submit it (``_submit``)."""
    intake = request.app[INTAKE]
    try:
        client = client_address(request.remote, request.headers.get("X-Forwarded-For"), intake.cfg.forwarded_allow_ips)
        wait = intake.cooldowns.wait_s(client)
        if wait:
            raise _rate_limited(wait)  # refused a moment ago: not worth reading the body for
        async with intake.gate.slot():
            body = await read()
            return await _submit(intake, client, parse(body))
    except Refusal as refusal:
        intake.metrics.refused(refusal.code)
        raise


def _rate_limited(wait_s: int) -> Refusal:
    return Refusal(429, "rate_limited", f"too many submissions; retry in {wait_s} s", {"Retry-After": str(wait_s)})


async def read_body(request: web.Request) -> bytes:
    """The body, at most INTAKE_MAX_BODY_BYTES (aiohttp's client_max_size is set to the same)."""
    limit = request.app[INTAKE].cfg.max_body_bytes
    if request.content_length is None or request.content_length <= limit:
        try:
            return await request.read()
        except web.HTTPRequestEntityTooLarge:
            pass  # a chunked body ran past client_max_size
    raise Refusal(413, "body_too_large", f"the body is larger than {limit} bytes; send a shorter text")


async def _submit(intake: Intake, client: str, form: CastForm) -> tuple[str, SubmitResult]:
    """Validate, then take the token and write in one atomic step; the histogram covers this."""
    cfg = intake.cfg
    started = time.perf_counter()
    voices = await intake.voices.required(form.voice)
    sub = check(form, Limits(cfg.max_chars, cfg.max_title_chars), voices.names, voices.default)
    cast_id = content_id(sub.text, sub.voice, sub.speed)
    sentences = await intake.planner.sentences(cast_id, sub.text)
    if sentences == 0:
        raise Refusal(422, "empty_text", "the text has nothing to read out; send some words")
    now_ms = time.time_ns() // 1_000_000
    meta = Meta(
        title=sub.title, voice=sub.voice, chars=len(sub.text), sentences=sentences, created_at=now_ms, speed=sub.speed
    )
    asked_at = intake.cooldowns.clock()
    try:
        result = await intake.store.submit(cast_id, sub.text, sub.voice, meta, limit=(intake.limiter, client))
    except RateLimited as limited:
        intake.cooldowns.refused(client, asked_at, limited.verdict)
        raise _rate_limited(limited.verdict.retry_after_s) from None
    intake.metrics.submitted(result, time.perf_counter() - started)
    return cast_id, result

