"""One way to refuse a request: raise ``Refusal``; one middleware answers it as JSON.

Every refusal is ``{"error": <code>, "message": <what to do>}`` with its status (docs/design.md,
"HTTP errors"); a subclass carries its own extra fields and adds them to that body (intake's
live text refusals say the ``offset`` to go on from). The middleware also turns aiohttp's own
errors (no such route, wrong method), an unreachable Redis or archive (503 with Retry-After) and a
bug (a logged 500) into that shape, and counts every request by route template and status. A
service may shape the body its own way for some routes (intake answers OpenAI's shape on
``/v1/*``) by passing ``shape``, which answers None where the plain body goes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from redis.exceptions import RedisError

from castlog import ArchiveUnavailable
from castlog.records import encode_json

from . import answers

log = logging.getLogger(__name__)

# The status label of a request whose client went away before the answer (nginx's convention).
CLIENT_CLOSED = 499
# Seconds a client is told to wait when Redis is unreachable or loading under a request.
UNAVAILABLE_RETRY_S = 2
# Seconds a client is told to wait when an archived cast's store cannot be read.
ARCHIVE_RETRY_S = 5
# Requests that matched no route share one label value, so scanners cannot grow the series.
UNMATCHED_ROUTE = "unmatched"
# Headers of aiohttp's own errors worth keeping in the JSON answer.
KEPT_HEADERS = ("Allow", "Retry-After")



class Refusal(Exception):
    """A request the service will not act on: answered with its status and ``{error, message}``."""

    def __init__(self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})

    def body(self) -> answers.Error:
        """The JSON answer; a subclass answers a subclass of ``Error``, with its own fields after these two."""
        return answers.Error(self.code, self.message)


def json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """``body`` as JSON (msgspec: structs and plain data alike)."""
    return web.Response(body=encode_json(body), status=status, headers=headers, content_type="application/json")


def error_response(refusal: Refusal) -> web.Response:
    """The answer to ``refusal``: its body with its status and headers."""
    return json_response(refusal.body(), status=refusal.status, headers=refusal.headers or None)


def route_name(request: web.Request) -> str:
    """The route template (``/api/casts/{id}``), never the raw path: metric labels stay few."""
    resource = request.match_info.route.resource
    return (resource.canonical if resource is not None else "") or UNMATCHED_ROUTE


# A service's own body for a refusal on some routes; None: the plain one (error_response).
Shape = Callable[[web.Request, Refusal], "web.Response | None"]
Count = Callable[[str, int], None]


def _uncounted(route: str, status: int) -> None:
    pass


def json_errors(
    *,
    codes: Mapping[int, tuple[str, str]],
    unavailable: str,
    internal: str,
    count: Count = _uncounted,
    shape: Shape | None = None,
) -> Middleware:
    """The middleware: ``codes`` names aiohttp's own errors by status (``(code, message)``),
    ``unavailable`` and ``internal`` say what to do after a Redis failure and after a bug."""

    def refusal_of(request: web.Request, exc: Exception) -> Refusal | None:
        """The refusal that ``exc`` means; None for an answer aiohttp gives as it is."""
        if isinstance(exc, Refusal):
            return exc
        if isinstance(exc, web.HTTPException):
            if exc.status < 400 or exc.content_type == "application/json":
                return None  # a redirect, or a JSON error made by hand
            code, message = codes.get(exc.status, (f"http_{exc.status}", exc.reason))
            return Refusal(exc.status, code, message, {k: v for k, v in exc.headers.items() if k in KEPT_HEADERS})
        if isinstance(exc, RedisError):  # unreachable, restarting or loading: not a bug, a wait
            log.warning("Redis failed under %s %s: %s", request.method, request.path, exc)
            return Refusal(503, "unavailable", unavailable, {"Retry-After": str(UNAVAILABLE_RETRY_S)})
        if isinstance(exc, ArchiveUnavailable):  # an archived cast whose store cannot be read now
            log.warning("%s", exc)  # the store's words (paths, bucket, endpoint) stay in the log
            return Refusal(503, "archive_unavailable", "this cast's audio is archived and the archive cannot be "
                           "read now; retry in a moment", {"Retry-After": str(ARCHIVE_RETRY_S)})
        # the one place that turns a bug into a plain 500
        log.error("unexpected error under %s %s", request.method, request.path, exc_info=exc)
        return Refusal(500, "internal", internal)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except asyncio.CancelledError:
            count(route_name(request), CLIENT_CLOSED)  # the client left (handler cancellation): not our error
            raise
        except Exception as exc:
            refusal = refusal_of(request, exc)
            if refusal is None:
                count(route_name(request), getattr(exc, "status", 500))
                raise
            response = (shape(request, refusal) if shape is not None else None) or error_response(refusal)
        count(route_name(request), response.status)
        return response

    return middleware
