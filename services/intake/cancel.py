"""Cancelling a cast from intake: who may, and the one call behind every route that cancels.

``POST /api/casts/{id}/cancel`` and the live WebSocket's ``{"type": "cancel"}`` both end in
``cancel_cast``: castlog flags the cast and tells the workers (``castlog/cancels.py``); the
worker holding it stops at the chunk in hand and ends the log as cancelled.
"""

from __future__ import annotations

from aiohttp import web

from castlog import cancel, is_cast_id
from castlog.cancels import CancelAnswer
from servicekit import json_response

from .authfail import key_matches
from .claim import cast_url
from .context import INTAKE, request_client
from .validate import Refusal


def may_cancel(request: web.Request, cast_id: str) -> bool:
    """Whether the request may cancel ``cast_id``: it carries the admin token or a key of
    STREAMTTS_API_KEYS as ``Authorization: Bearer``. The one check, so that a cast's own write
    token can take its place."""
    cfg = request.app[INTAKE].cfg
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    allowed = sorted(cfg.api_keys) + ([cfg.admin_token] if cfg.admin_token else [])
    matches = key_matches(token.strip(), allowed)
    return scheme.lower() == "bearer" and matches


async def cancel_cast(app: web.Application, cast_id: str) -> CancelAnswer:
    return await cancel(app[INTAKE].redis, cast_id)


async def post_cancel(request: web.Request) -> web.Response:
    """POST /api/casts/{id}/cancel: 202 while the worker cuts it short, 409 once it had ended."""
    cast_id = request.match_info["id"]
    if not is_cast_id(cast_id):
        raise Refusal(404, "not_found", "no such cast")
    intake = request.app[INTAKE]
    client = request_client(request)
    intake.auth_failures.check(client)  # guessing the admin token or a key here runs at the same limit
    if not may_cancel(request, cast_id):
        if "Authorization" in request.headers:  # a credential given and wrong: a guess
            await intake.auth_failures.failed(client, "admin_token")
        raise Refusal(401, "unauthorized", "send the admin token or an API key as Authorization: Bearer <token>")
    answer = await cancel_cast(request.app, cast_id)
    if answer == "missing":
        raise Refusal(404, "not_found", "no such cast")
    if answer == "ended":
        raise Refusal(409, "cast_ended", "the cast has ended already; its link replays it")
    return json_response({"id": cast_id, "url": cast_url(cast_id), "cancelled": True}, status=202)
