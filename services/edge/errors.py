"""Edge's refusals, raised as servicekit's ``Refusal``, and its error middleware (servicekit's,
with edge's wording): every error a JSON ``{"error", "message"}``, every request counted."""

from __future__ import annotations

from aiohttp.typedefs import Middleware

from servicekit import Refusal, json_errors

from .metrics import EdgeMetrics

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


def not_found(message: str = STATUS_CODES[404][1]) -> Refusal:
    return Refusal(404, "not_found", message)


def bad_request(message: str) -> Refusal:
    return Refusal(400, "bad_request", message)


def middleware(metrics: EdgeMetrics) -> Middleware:
    return json_errors(
        codes=STATUS_CODES, unavailable="the cast store is unreachable; retry shortly",
        internal=STATUS_CODES[500][1], count=metrics.requests,
    )
