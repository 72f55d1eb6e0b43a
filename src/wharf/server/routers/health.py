"""Health, unauthenticated: ``/health/live`` (the process answers; no database access),
``/health/ready`` (the database answers too: one small read, else 503), and ``/health`` (the
same as ready; ``wharf server up`` polls it).

A failing readiness answers like any request during an outage (``wharf.server.errors``: fixed
words, nothing about the database's host, port, user or name).
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from wharf import __version__
from wharf.server.deps import StateDep
from wharf.server.routers._common import json_response
from wharf.server.schemas.responses import Health
from wharf.store.models import PageRequest

_ONE = PageRequest(size=1)


def build_router() -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get("/health/live", response_model=Health)
    def live() -> Response:
        return json_response(Health(version=__version__))

    @router.get("/health/ready", response_model=Health)
    def ready(state: StateDep) -> Response:
        state.store.users.list(_ONE)  # raises StoreUnavailableError (503) unless it answers
        return json_response(Health(version=__version__))

    router.add_api_route("/health", ready, methods=["GET"], response_model=Health)
    return router
