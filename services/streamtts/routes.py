"""The public route table, written once: which service answers a request at the front door.

``streamtts up``'s proxy routes by it (``pick``); compose's Caddyfile and k3s's IngressRoute are
checked against it, method by method, with real requests (tests/deploy/test_proxy.py,
tests/deploy/test_k3s.py), and every route of intake's and edge's own routers is checked to be
reachable through it (tests/streamtts/test_routes.py). Change a route here, then in those two files.

The rules read in order, the first match wins; they are coarse on purpose, so that each front door
can say them (an Ingress cannot match a pattern, a Traefik rule cannot match a method set):
edge serves only reads, so every other method is intake's, and among reads only ``/v1/`` (except
Durable Streams) and intake's two self-descriptions are intake's.
"""

from __future__ import annotations

from dataclasses import dataclass

INTAKE, EDGE = "intake", "edge"
HIDDEN = ""  # the front door answers 404 itself: /metrics is scraped on the internal network only
READS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Route:
    service: str  # INTAKE, EDGE or HIDDEN
    paths: tuple[str, ...] = ()  # exact paths, or prefixes ending in "*"; empty: every path
    methods: frozenset[str] = frozenset()  # empty: every method
    but: frozenset[str] = frozenset()  # methods this rule does not take
    why: str = ""

    def matches(self, method: str, path: str) -> bool:
        if self.methods and method not in self.methods or method in self.but:
            return False
        return not self.paths or any(path.startswith(p[:-1]) if p.endswith("*") else path == p for p in self.paths)


TABLE = (
    Route(HIDDEN, ("/metrics",), why="Prometheus scrapes each service directly, never through the front door"),
    Route(EDGE, ("/v1/stream/*",), READS, why="Durable Streams' reads; their writes are intake's (below)"),
    Route(INTAKE, ("/v1/*", "/api/voices", "/api/openapi.json"),
          why="the OpenAI- and Deepgram-compatible APIs, the live WebSocket, WebRTC offers, voices"),
    Route(INTAKE, but=READS, why="every write (submits, an open cast's text, close, cancel, the admin's DELETE)"),
    Route(EDGE, why="pages, a cast's state, records, SSE and audio"),
)


def pick(method: str, path: str) -> str:
    """The service that answers ``method path`` (a path without its query), or HIDDEN."""
    return next(route.service for route in TABLE if route.matches(method.upper(), path))
