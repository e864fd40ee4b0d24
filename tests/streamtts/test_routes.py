"""The route table (streamtts/routes.py) against the services' own routers: every public route of
intake and edge is sent to the service that has it. The doors are checked against the same table
in test_proxy.py (the local proxy), tests/deploy/test_proxy.py (Caddy) and tests/deploy/test_k3s.py."""

from __future__ import annotations

import pytest

from streamtts import routes
from tests.support.routetable import CAST_ID, service_routes


@pytest.mark.rule("one-route-table")
def test_every_route_of_intake_and_edge_is_reached_through_the_table() -> None:
    owned = service_routes()
    assert ("POST", f"/api/casts/{CAST_ID}/cancel") in owned  # #34 item 8: it reached edge (404)
    wrong = {key: (service, routes.pick(*key)) for key, service in owned.items() if routes.pick(*key) != service}
    assert wrong == {}


def test_the_deepgram_http_route_and_every_v1_method_is_intakes() -> None:
    for method in ("GET", "POST", "PUT", "DELETE"):
        assert routes.pick(method, "/v1/speak") == routes.INTAKE
    assert routes.pick("GET", "/v1/stream/a") == routes.EDGE and routes.pick("POST", "/v1/stream/a") == routes.INTAKE


def test_metrics_are_not_public() -> None:
    assert {routes.pick(m, "/metrics") for m in ("GET", "HEAD", "POST")} == {routes.HIDDEN}
