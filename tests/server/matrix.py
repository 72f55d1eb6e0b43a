"""The route table of the RBAC matrix: every route, what it needs, and a valid request for it."""

from __future__ import annotations

from tests.server.routes_accounts import ACCOUNT_ROUTES
from tests.server.routes_schedule_tokens import SCHEDULE_TOKEN_ROUTES
from tests.server.routes_store import STORE_ROUTES
from tests.server.things import EXPECT, NOW, Route, Things

ROUTES: list[Route] = [*ACCOUNT_ROUTES, *STORE_ROUTES, *SCHEDULE_TOKEN_ROUTES]

UNAUTHENTICATED = {
    ("POST", "/api/v1/auth/login"),
    ("POST", "/api/v1/auth/external"),
}
"""Routes that authenticate by their body (tested in ``test_auth`` / ``test_external_identity``)."""

NEEDS_RESOURCE_MANAGER = {
    ("GET", "/api/v1/resource_requests"),
    ("GET", "/api/v1/resource_requests/{request_id}"),
    ("POST", "/api/v1/resource_requests/{request_id}/renew"),
    ("POST", "/api/v1/resource_requests/{request_id}/release"),
    ("POST", "/api/v1/resource_requests/{request_id}/cancel"),
    ("GET", "/api/v1/resource_requests/{request_id}/explain"),
    ("GET", "/api/v1/resource_pools"),
    ("GET", "/api/v1/resource_pools/{pool}"),
    ("GET", "/api/v1/resource_pools/{pool}/queue"),
    ("GET", "/api/v1/resource_pools/{pool}/allocations"),
    ("GET", "/api/v1/resource_policies"),
    ("GET", "/api/v1/resource_policies/{policy}"),
    ("GET", "/api/v1/resource_descriptors"),
}
"""Routes answered by the Resource Manager behind the server (``world`` has none): their roles
are tested against a real one in ``test_resource_request_routes`` and
``test_resource_pool_routes``."""

__all__ = [
    "EXPECT",
    "NEEDS_RESOURCE_MANAGER",
    "NOW",
    "ROUTES",
    "UNAUTHENTICATED",
    "Route",
    "Things",
]
