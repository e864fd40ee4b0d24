"""``/healthz`` and ``/readyz`` built from a list of checks: the first that fails answers 503.

A check looks at the app and returns ``None`` when all is well, or the ``Problem`` that keeps the
service from its work; a passing probe answers ``{"status": "ok"}``, or the ``Health`` that
``info`` makes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Handler
from redis.asyncio import Redis

from .answers import Error, Health
from .connect import healthy
from .errors import json_response

# What keeps a service from its work: the 503's body, {"error": <code>, "message"}.
Problem = Error
Check = Callable[[web.Application], Awaitable["Problem | None"]]
Info = Callable[[web.Application], Awaitable[Health]]


def probe(*checks: Check, info: Info | None = None) -> Handler:
    """A handler that runs ``checks`` in order and answers 503 with the first problem, else 200."""

    async def handler(request: web.Request) -> web.StreamResponse:
        for check in checks:
            problem = await check(request.app)
            if problem is not None:
                return json_response(problem, status=503)
        return json_response(await info(request.app) if info is not None else Health(status="ok"))

    return handler


def redis_answers(redis: Callable[[web.Application], Redis], problem: Problem) -> Check:
    """A check that Redis answers PING (``redis`` finds the app's client)."""

    async def check(app: web.Application) -> Problem | None:
        return None if await healthy(redis(app)) else problem

    return check
