"""``GET /docs``: an interactive page of the public origin's OpenAPI document (Swagger UI).

Swagger UI's files come from the ``swagger-ui-py`` wheel (only its static folder is served; the
package is never imported), so the page needs no CDN and works offline. "Try it out" sends its
requests to this origin: on the front proxy, ``/v1/*`` and the submits reach intake.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from aiohttp import web

from servicekit import Refusal

ASSETS_PREFIX = "/docs/assets/"
# The files of Swagger UI the page loads (the wheel also holds editors and source maps).
ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")
PAGE = Path(__file__).resolve().parent / "static" / "docs.html"  # loads them, then static/docs.js


def swagger_folder() -> Path | None:
    """Swagger UI's static files in the installed ``swagger-ui-py``, or None."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "static"
    return folder if all((folder / name).is_file() for name in ASSETS) else None


async def docs_page(request: web.Request) -> web.FileResponse:
    if swagger_folder() is None:
        raise Refusal(404, "not_found", "the API page needs swagger-ui-py: pip install swagger-ui-py; "
                      "the document itself is at /api/openapi.json")
    return web.FileResponse(PAGE, headers={"Cache-Control": "no-cache"})


async def docs_asset(request: web.Request) -> web.FileResponse:
    name = request.match_info["name"]
    folder = swagger_folder()
    if name not in ASSETS or folder is None:
        raise Refusal(404, "not_found", "no such file")
    return web.FileResponse(folder / name, headers={"Cache-Control": "public, max-age=86400"})
