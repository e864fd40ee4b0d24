"""The requests every front door is checked with: each route of intake's and edge's own routers,
and each rule of ``streamtts.routes.TABLE`` under every method, with the service that must answer
(``routes.pick``). tests/streamtts (the local proxy), tests/deploy (Caddy, the IngressRoute) share
them, so the three doors are held to one table."""

from __future__ import annotations

import re

from aiohttp import web

from streamtts import routes

METHODS = ("GET", "HEAD", "OPTIONS", "POST", "PUT", "DELETE", "PATCH")
CAST_ID = "AbCdEfGhIjKl"
# Answered by each service for its own probes and scrapers, not through the front door.
PRIVATE = frozenset({"/healthz", "/readyz", "/metrics"})


def sample_path(template: str) -> str:
    """A concrete path for a router's or the table's pattern: ``{id}`` → a cast id, ``*`` → a/b."""
    path = re.sub(r"\{[^}]+\}", CAST_ID, template)
    return path[:-1] + "a/b" if path.endswith("*") else path


def router_routes(app: web.Application) -> set[tuple[str, str]]:
    """(method, sample path) of every public route an app's router has."""
    found = set()
    for route in app.router.routes():
        info = route.resource.get_info() if route.resource is not None else {}
        template = info.get("path") or info.get("formatter") or (info["prefix"] + "/x.css")
        if template not in PRIVATE:
            found.add((route.method, sample_path(template)))
    return found


def service_routes() -> dict[tuple[str, str], str]:
    """Every public route of intake's and edge's routers → the service that has it."""
    import edge
    import intake

    owned: dict[tuple[str, str], str] = {}
    for name, app in ((routes.INTAKE, intake.create_app(intake.Config())), (routes.EDGE, edge.create_app(edge.Config()))):
        for key in router_routes(app):
            assert key not in owned, f"{key} is both {owned[key]}'s and {name}'s: the front door can send it to one"
            owned[key] = name
    return owned


# Requests no router lists but a door must route: another engineer's Deepgram HTTP route, writes
# to edge's paths (intake's 404/405, never edge's), reads near intake's paths.
EXTRA = [("POST", "/v1/speak"), ("POST", "/api/casts/" + CAST_ID + "/cancel"), ("GET", "/generate"),
         ("GET", "/api/casts"), ("GET", "/api/voicesX"), ("GET", "/api/voices/af_heart"), ("GET", "/metrics"),
         ("GET", "/v1"), ("OPTIONS", "/api/casts"), ("GET", "/c/" + CAST_ID + "/text")]


def table_samples() -> list[tuple[str, str]]:
    """Each table rule's paths (and a path no rule names) under every method."""
    paths = {sample_path(p) for route in routes.TABLE for p in route.paths} | {"/c/" + CAST_ID}
    return [(method, path) for path in sorted(paths) for method in METHODS]


def front_door_cases() -> list[tuple[str, str, str]]:
    """(method, path, service that must answer: intake, edge, or routes.HIDDEN) for every door."""
    keys = sorted(set(service_routes()) | set(table_samples()) | set(EXTRA))
    return [(method, path, routes.pick(method, path)) for method, path in keys]
