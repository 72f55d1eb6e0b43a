"""The route table of the RBAC matrix: every route, what it needs, and a valid request for it."""

from __future__ import annotations

from tests.server.routes_accounts import ACCOUNT_ROUTES
from tests.server.routes_store import STORE_ROUTES
from tests.server.things import EXPECT, NOW, Route, Things

ROUTES: list[Route] = [*ACCOUNT_ROUTES, *STORE_ROUTES]

UNAUTHENTICATED = {
    ("POST", "/api/v1/auth/login"),
    ("POST", "/api/v1/auth/external"),
}
"""Routes that authenticate by their body (tested in ``test_auth`` / ``test_external_identity``)."""

__all__ = ["EXPECT", "NOW", "ROUTES", "UNAUTHENTICATED", "Route", "Things"]
