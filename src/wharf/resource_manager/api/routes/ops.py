"""``GET /health`` (no token) and ``GET /metrics`` (any valid token, or none when the setting
``metrics_public`` is on).

``/health`` answers 200 ``{"status": "ok"}`` when the database answers, else 503.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from wharf.resource_manager.api.deps import StateDep, authenticate
from wharf.resource_manager.api.metrics import CONTENT_TYPE

router = APIRouter(tags=["operations"])


@router.get("/health")
def health(state: StateDep) -> dict[str, str]:
    state.metrics.ping()
    return {"status": "ok"}


@router.get("/metrics", response_class=Response)
def metrics(request: Request, state: StateDep) -> Response:
    if not state.settings.metrics_public:
        authenticate(state, request.headers.get("authorization"))
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)
