"""``/health``: unauthenticated liveness (no database access; ``wharf server up`` polls it)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from wharf import __version__
from wharf.server.routers._common import json_response
from wharf.server.schemas.responses import Health


def build_router() -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get("/health", response_model=Health)
    def health() -> Response:
        return json_response(Health(version=__version__))

    return router
