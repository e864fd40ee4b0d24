"""Cancelling a cast from intake: who may, and the one call behind every route that cancels.

``POST /api/casts/{id}/cancel`` and the live WebSocket's ``{"type": "cancel"}`` both end in
castlog's ``cancel``: it flags the cast and tells the workers (``castlog/cancels.py``); the
worker holding it stops at the chunk in hand and ends the log as cancelled.
"""

from __future__ import annotations

from aiohttp import web

from castlog import cancel, is_cast_id, read_recipe
from servicekit import json_response
from servicekit.answers import Cancelled
from servicekit.keys import key_matches

from .claim import bearer, cast_url, request_tag
from .context import INTAKE, request_client
from .validate import Refusal


async def post_cancel(request: web.Request) -> web.Response:
    """POST /api/casts/{id}/cancel: 202 while the worker cuts it short, 409 once it had ended."""
    cast_id = request.match_info["id"]
    if not is_cast_id(cast_id):
        raise Refusal(404, "not_found", "no such cast")
    intake = request.app[INTAKE]
    client = request_client(request)
    intake.auth_failures.check(client)  # guessing the admin token or a key here runs at the same limit
    # The admin token cancels any cast; a key of STREAMTTS_API_KEYS only those submitted with it
    # (a tenant does not cancel another's).
    token = bearer(request)
    admin = intake.cfg.admin_token is not None and key_matches(token, [intake.cfg.admin_token])
    if not admin and not key_matches(token, intake.cfg.api_keys):
        if "Authorization" in request.headers:  # a credential given and wrong: a guess
            await intake.auth_failures.failed(client, "admin_token")
        raise Refusal(401, "unauthorized", "send the admin token or an API key as Authorization: Bearer <token>")
    if not admin:
        recipe = await read_recipe(intake.redis, cast_id)
        if recipe is None or recipe.client != request_tag(request, client):
            # another tenant's cast answers as a missing one: the key learns nothing of it
            raise Refusal(404, "not_found", "no such cast among those submitted with this key; the admin token "
                          "cancels any")
    answer = await cancel(intake.redis, cast_id)
    if answer == "missing":
        raise Refusal(404, "not_found", "no such cast")
    if answer == "ended":
        raise Refusal(409, "cast_ended", "the cast has ended already; its link replays it")
    return json_response(Cancelled(id=cast_id, url=cast_url(cast_id), cancelled=True), status=202)
