"""``/healthz`` and ``/readyz`` built from a list of checks: the first that fails answers 503.

A check looks at the app and returns ``None`` when all is well, or the ``Problem`` that keeps the
service from its work; a passing probe answers ``{"status": "ok"}`` and what ``info`` adds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler
from redis.asyncio import Redis

from .connect import healthy
from .errors import json_response


@dataclass(frozen=True)
class Problem:
    code: str
    message: str


Check = Callable[[web.Application], Awaitable["Problem | None"]]
Info = Callable[[web.Application], Awaitable[Mapping[str, Any]]]


def probe(*checks: Check, info: Info | None = None) -> Handler:
    """A handler that runs ``checks`` in order and answers 503 with the first problem, else 200."""

    async def handler(request: web.Request) -> web.StreamResponse:
        for check in checks:
            problem = await check(request.app)
            if problem is not None:
                return json_response({"error": problem.code, "message": problem.message}, status=503)
        extra = await info(request.app) if info is not None else {}
        return json_response({"status": "ok", **extra})

    return handler


def redis_answers(redis: Callable[[web.Application], Redis], problem: Problem) -> Check:
    """A check that Redis answers PING (``redis`` finds the app's client)."""

    async def check(app: web.Application) -> Problem | None:
        return None if await healthy(redis(app)) else problem

    return check
