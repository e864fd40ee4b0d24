"""The building blocks of the OpenAPI document (``openapi.py``): the limits each service
documents, reference and response helpers, and the routes every service answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OPENAPI_VERSION = "3.1.0"
API_VERSION = "1.0.0"
CAST_ID_PATTERN = "^[A-Za-z0-9_-]{12}$"
REF_TEMPLATE = "#/components/schemas/{name}"
CAST_ID_PARAM = {
    "name": "id", "in": "path", "required": True, "description": "the cast id: 12 URL-safe base64 characters",
    "schema": {"type": "string", "pattern": CAST_ID_PATTERN},
}  # fmt: skip
# A WebSocket route's answer to its upgrade.
UPGRADED = {"description": "Switching to the WebSocket protocol"}


Json = dict[str, Any]


@dataclass(frozen=True)
class ApiPart:
    """A library's own routes (Durable Streams'), handed to :func:`openapi.document` by the services
    that serve them: servicekit imports no library above it."""

    tag: Json  # {"name": ..., "description": ...}
    paths: Json



@dataclass(frozen=True)
class IntakeLimits:
    """Intake's documented limits (INTAKE_MAX_CHARS, INTAKE_MAX_TITLE_CHARS, INTAKE_MAX_BODY_BYTES)."""

    max_chars: int
    max_title_chars: int
    max_body_bytes: int


@dataclass(frozen=True)
class EdgeLimits:
    """Edge's documented limits (EDGE_MAX_RECORDS_LIMIT, EDGE_MAX_WAIT_S)."""

    max_records_limit: int
    max_wait_s: float


def ref(name: str) -> Json:
    return {"$ref": REF_TEMPLATE.format(name=name)}


def json_body(schema: Json, description: str, headers: Json | None = None) -> Json:
    out: Json = {"description": description, "content": {"application/json": {"schema": schema}}}
    if headers:
        out["headers"] = headers
    return out


def error_body(description: str, retry_after: bool = False) -> Json:
    retry = {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}}
    return json_body(ref("Error"), description, retry if retry_after else None)


def refused(shape: str, descriptions: dict[str, str]) -> Json:
    """A refusal in ``shape`` (an error schema's name) for each status, in the statuses' order."""
    return {status: json_body(ref(shape), descriptions[status]) for status in sorted(descriptions)}


def limit_text(value: float | None, setting: str) -> str:
    """A limit as documented: the number when this process knows it, else its setting's name."""
    if value is None:
        return setting
    return f"{value:g}" if isinstance(value, float) else str(value)


def op(operation_id: str, tag: str, summary: str, responses: Json, **more: Any) -> Json:
    return {"operationId": operation_id, "tags": [tag], "summary": summary, **more, "responses": responses}


# Each service answers these on its own port; on the public origin, edge does.
OPS_PATHS: Json = {
    "/healthz": {"get": op(
        "health", "ops", "200 when the service's Redis answers (and, for edge, its shared tail runs); else 503",
        {"200": json_body(ref("Health"), "healthy"), "503": error_body("not healthy")},
    )},
    "/readyz": {"get": op(
        "ready", "ops", "200 when the service can do its work now (synth: the model is warm); else 503 with why",
        {"200": json_body(ref("Health"), "ready"), "503": error_body("not ready yet")},
    )},
    "/metrics": {"get": op(
        "metrics", "ops", "Prometheus metrics",
        {"200": {"description": "Prometheus text", "content": {"text/plain": {"schema": {"type": "string"}}}}},
    )},
}  # fmt: skip
