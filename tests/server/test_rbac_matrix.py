"""Authorization matrix: every route of the API x anonymous / viewer / member / project admin /
member of another project / admin, each with a request that is valid for a permitted role."""

from __future__ import annotations

import pytest

from tests.server.conftest import World, body
from tests.server.matrix import (
    EXPECT,
    NEEDS_RESOURCE_MANAGER,
    ROUTES,
    UNAUTHENTICATED,
    Route,
    Things,
)

ROLES = ("anonymous", "viewer", "member", "padmin", "other", "admin")


def test_the_matrix_covers_every_route(world: World) -> None:
    paths = world.client().get("/openapi.json").json()["paths"]
    served = {(method.upper(), path) for path, ops in paths.items() for method in ops}
    listed = {(r.method, r.template) for r in ROUTES} | UNAUTHENTICATED | NEEDS_RESOURCE_MANAGER
    assert served == listed


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.template}")
def test_route_by_role(world: World, route: Route) -> None:
    things = Things(world)
    outcomes = {}
    for role in ROLES:
        client = world.as_role(role)
        json_body = route.body(things) if route.body else None
        response = client.request(route.method, route.path(things), json=json_body)
        outcomes[role] = (response.status_code, body(response))
    expected = {
        role: route.status if status is None else status
        for role, status in EXPECT[route.kind].items()
    }
    assert {role: code for role, (code, _) in outcomes.items()} == expected, outcomes
    for code, answer in outcomes.values():
        if code >= 400:
            assert isinstance(answer, dict) and isinstance(answer["detail"], str), answer
    if route.kind in ("sweep_a", "list_of_a"):
        assert outcomes["other"][1]["items"] == []  # nothing of project A is shown
