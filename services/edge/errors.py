"""Edge's refusals, raised as servicekit's ``Refusal``, and the wording of its error middleware
(servicekit's ``json_errors``, in ``app.py``): every error a JSON ``{"error", "message"}``."""

from __future__ import annotations

from servicekit import Refusal

# Codes for statuses that aiohttp itself raises (unknown route, wrong method, ...).
STATUS_CODES = {
    400: ("bad_request", "check the request's parameters"),
    404: ("not_found", "no such page or cast; cast links look like /c/<12 characters>"),
    405: ("method_not_allowed", "this path is read-only: use GET"),
    413: ("too_large", "send a smaller request"),
}
# What a bug answers (a logged 500), and a Redis that does not answer (503).
INTERNAL = "something went wrong on our side; retry in a moment"
UNAVAILABLE = "the cast store is unreachable; retry shortly"


def not_found(message: str) -> Refusal:
    return Refusal(404, "not_found", message)


def bad_request(message: str) -> Refusal:
    return Refusal(400, "bad_request", message)
