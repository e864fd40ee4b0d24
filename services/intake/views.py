"""HTTP handlers of the claim path: parse, call, respond. Refusals are raised as `Refusal`; the
app's middleware turns them into JSON answers (4xx, or 503 when intake sheds load). The speech
room's handlers (``/v1/*``) are in ``speech/``."""

from __future__ import annotations

import asyncio

from aiohttp import web
from redis.asyncio import Redis

from castlog import cast_key, is_cast_id, request_delete
from servicekit import Problem, json_response, probe, redis_answers
from servicekit.answers import Cast, Deleted, Health
from servicekit.keys import bearer, key_matches

from . import live
from .claim import Screen, cast_url, read_body, submit
from .context import INTAKE, request_client
from .validate import CAST_SHAPE, CastForm, Refusal, decode, is_form, parse_form

STATUS_OF: dict[str, int] = {"new": 201, "existing": 200, "reenqueued": 202}

# How often a delete's answer looks whether the worker has removed the cast.
DELETE_POLL_S = 0.05


async def post_cast(request: web.Request) -> web.Response:
    """POST /api/casts: JSON in, the cast's link out (or, with "live": true, an open cast)."""
    return await _take(request, allow_form=False)


async def post_generate(request: web.Request) -> web.Response:
    """POST /generate: the paste form (303 to the cast) or JSON (as POST /api/casts)."""
    return await _take(request, allow_form=True)


async def get_voices(request: web.Request) -> web.Response:
    return json_response((await request.app[INTAKE].voices.required(None)).answer())  # 503 warming_up before any list


async def delete_cast(request: web.Request) -> web.Response:
    """DELETE /api/casts/{id} (admin): a worker removes the log, the catalog and the claim in one
    step, the archived audio after it; an identical submit then synthesizes again. 404 unless
    the request carries ``Authorization: Bearer $STREAMTTS_ADMIN_TOKEN`` (and one is
    configured), so that the route does not even show that it exists. Intake only asks, with the
    token's proof (castlog.deletes: its Redis user deletes nothing), and waits up to
    INTAKE_DELETE_WAIT_S for the cast to be gone: 200, else 202 (asked, not confirmed)."""
    intake = request.app[INTAKE]
    token, given = intake.cfg.admin_token, request.headers.get("Authorization", "")
    if token is None or not given:
        raise Refusal(404, "not_found", "no such route")
    client = request_client(request)
    intake.auth_failures.check(client)
    if not key_matches(bearer(request), (token,)):
        await intake.auth_failures.failed(client, "admin_token")
        raise Refusal(404, "not_found", "no such route")
    cast_id = request.match_info["id"]
    if not is_cast_id(cast_id) or not await intake.redis.exists(cast_key(cast_id)):
        raise Refusal(404, "not_found", "no such cast")
    await request_delete(intake.redis, cast_id, token)
    if await _gone(intake.redis, cast_id, intake.cfg.delete_wait_s):
        return json_response(Deleted(id=cast_id, deleted=True))
    return json_response(Deleted(id=cast_id, deleted=False, status="asked", message="no worker confirmed the delete "
                                 "in time (workers carry out a request only while they run): GET the cast to see "
                                 "whether it is gone, and send the same DELETE again if not"), 202)


async def _gone(redis: Redis, cast_id: str, wait_s: float) -> bool:
    """Whether the cast's log is gone within ``wait_s`` (polled: an admin's rare request)."""
    deadline = asyncio.get_running_loop().time() + wait_s
    while await redis.exists(cast_key(cast_id)):
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(DELETE_POLL_S)
    return True


_REDIS_ANSWERS = redis_answers(
    lambda app: app[INTAKE].redis, Problem("unavailable", "Redis does not answer; check REDIS_URL and the Redis server")
)


async def _published(app: web.Application) -> Health:
    voices = await app[INTAKE].voices.current()
    return Health(status="ok", voices=len(voices.names) if voices else None, default=voices.default if voices else None)


get_healthz = probe(_REDIS_ANSWERS)
# Ready to take submits: Redis answers. The body says whether a worker's voices are published
# (a submit before that is answered 503 warming_up); the local origin's /readyz waits for both.
get_readyz = probe(_REDIS_ANSWERS, info=_published)


async def _take(request: web.Request, *, allow_form: bool) -> web.Response:
    """Admit, read, check and submit one cast (or open one, for ``{"live": true}``), its client's
    token taken in the same Redis round trip; the answer.

    A request refused before that round trip touches no key and spends no token; every refusal
    is counted by its code.
    """
    async with Screen(request) as client:
        pasted = is_form(request.content_type, request.charset, allow_form=allow_form)
        body = await read_body(request)
        if pasted:
            claimed = await submit(request, client, parse_form(body))
            return web.Response(status=303, headers={"Location": cast_url(claimed.cast_id)})
        if live.asks_live(body):
            return await live.open_from_body(request.app, client, body)
        claimed = await submit(request, client, decode(body, CastForm, CAST_SHAPE))
    url = cast_url(claimed.cast_id)
    return json_response(Cast(id=claimed.cast_id, url=url, status=claimed.result), STATUS_OF[claimed.result],
                         {"Location": url})
