"""JSON refusals, and the middleware that counts requests and keeps stack traces from clients."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web
from aiohttp.typedefs import Middleware
from redis.exceptions import RedisError

from castlog import ArchiveUnavailable

from .metrics import EdgeMetrics

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# The status label of a request whose client went away before the answer (nginx's convention).
CLIENT_CLOSED = 499
# Seconds a client is told to wait when Redis is unreachable or loading under a request.
UNAVAILABLE_RETRY_S = 2
# Default codes for statuses that aiohttp itself raises (unknown route, wrong method, ...).
STATUS_CODES = {
    400: ("bad_request", "check the request's parameters"),
    404: ("not_found", "no such page or cast; cast links look like /c/<12 characters>"),
    405: ("method_not_allowed", "this path is read-only: use GET"),
    413: ("too_large", "send a smaller request"),
    429: ("rate_limited", "slow down and retry after the time in Retry-After"),
    500: ("internal", "something went wrong on our side; retry in a moment"),
    503: ("unavailable", "the service is busy or starting; retry in a moment"),
}


def refusal(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> web.HTTPException:
    """An HTTP error with the JSON body every refusal carries: ``{"error", "message"}``."""
    exc = web.HTTPException(
        text=web.json_response({"error": code, "message": message}).text,
        content_type="application/json", headers=headers,
    )
    exc.set_status(status)
    return exc


def not_found(message: str = STATUS_CODES[404][1]) -> web.HTTPException:
    return refusal(404, "not_found", message)


def bad_request(message: str) -> web.HTTPException:
    return refusal(400, "bad_request", message)


def route_name(request: web.Request) -> str:
    """The route template (``/api/casts/{id}``), never the raw path: labels stay few."""
    route = request.match_info.route
    info = route.resource.canonical if route.resource is not None else ""
    return info or "unmatched"


def make_middleware(metrics: EdgeMetrics) -> Middleware:
    @web.middleware
    async def errors_and_metrics(request: web.Request, handler: Handler) -> web.StreamResponse:
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            if exc.status >= 400 and exc.content_type != "application/json":
                code, message = STATUS_CODES.get(exc.status, ("error", exc.reason))
                raise refusal(exc.status, code, message, headers=_keep_headers(exc)) from None
            raise
        except ArchiveUnavailable as exc:  # an archived cast this edge cannot read now
            log.warning("%s", exc)
            status = 503
            return web.json_response({"error": "archive_unavailable", "message": f"{exc}; retry in a moment"},
                                     status=503, headers={"Retry-After": "5"})
        except asyncio.CancelledError:
            status = CLIENT_CLOSED  # the client left (handler cancellation): not our error
            raise
        except RedisError as exc:  # unreachable, restarting or loading: not a bug, a wait
            log.warning("Redis failed under %s %s: %s", request.method, request.path, exc)
            status = 503
            return web.json_response(
                {"error": "unavailable", "message": "the cast store is unreachable; retry shortly"},
                status=503, headers={"Retry-After": str(UNAVAILABLE_RETRY_S)},
            )
        except Exception:  # noqa: BLE001 - the one place that turns a bug into a plain 500
            log.exception("unhandled error on %s %s", request.method, request.path)
            code, message = STATUS_CODES[500]
            return web.json_response({"error": code, "message": message}, status=500)
        finally:
            metrics.requests.labels(route=route_name(request), status=str(status)).inc()

    return errors_and_metrics


def _keep_headers(exc: web.HTTPException) -> dict[str, str]:
    """Headers worth keeping when a plain aiohttp error is turned into JSON (Allow, Retry-After)."""
    return {k: v for k, v in exc.headers.items() if k in ("Allow", "Retry-After")}
