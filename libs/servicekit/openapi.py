"""The OpenAPI 3.1 document of the public origin: intake's routes and edge's, as plain data.

Intake serves it at ``/api/openapi.json`` (the front proxy sends that path to intake) and edge
the same document at ``/api/edge/openapi.json``. Services never import each other, so both route
tables live here; a library above servicekit (durablestreams) gives its part through the services
(``parts``). Each service fills in the limits it knows from its own config; a limit of the
other service is named by its setting instead of a number the serving process cannot know.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from aiohttp import web

from .openapi_edge import edge_paths
from .openapi_intake import intake_paths, limit_cast_request
from .openapi_live import LIVE_PATHS, WRITE_TOKEN_SCHEME
from .openapi_parts import API_VERSION, OPENAPI_VERSION, OPS_PATHS, ApiPart, EdgeLimits, IntakeLimits, Json
from .openapi_v1 import V1_PATHS
from .schemas import generated_schemas, record_schemas


def document(intake: IntakeLimits | None = None, edge: EdgeLimits | None = None, parts: Sequence[ApiPart] = ()) -> Json:
    """A fresh document of every public route, ``parts``' too, with the limits given (a caller may
    change it freely)."""
    schemas = {**generated_schemas(), **record_schemas()}
    limit_cast_request(schemas["CastRequest"], intake)
    doc = {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "StreamTTS",
            "version": API_VERSION,
            "description": "Submit a text and get its cast's link at once (intake); replay and follow the "
            "cast's log, its audio and its state (edge).",
        },
        "tags": [
            {"name": "intake", "description": "Submissions: answered by intake"},
            {"name": "edge", "description": "The read path and the pages: answered by edge"},
            {"name": "ops", "description": "Each service answers these on its port; the public origin's are edge's"},
            {"name": "openai", "description": "OpenAI-compatible speech API: answered by intake"},
            *(part.tag for part in parts),
        ],
        "paths": {**intake_paths(intake), **LIVE_PATHS, **edge_paths(edge), **OPS_PATHS, **V1_PATHS,
                  **{path: ops for part in parts for path, ops in part.paths.items()}},
        "components": {"schemas": schemas, "securitySchemes": {"writeToken": WRITE_TOKEN_SCHEME}},
    }
    # A round trip through JSON: plain data that shares no object with another document or this module.
    return msgspec.json.decode(msgspec.json.encode(doc))  # type: ignore[no-any-return]


def serve_openapi(router: web.UrlDispatcher, path: str, doc: Json) -> None:
    """GET ``path`` answers ``doc``: intake's and edge's route to the one document, encoded once."""
    body = msgspec.json.encode(doc)

    async def openapi(_: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    router.add_get(path, openapi)

