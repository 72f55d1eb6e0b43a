"""``GET /health``, ``/health/ready``, ``/health/live`` (no token) and ``GET /metrics`` (any
valid token, or none when the setting ``metrics_public`` is on).

``/health`` and ``/health/ready`` answer 200 ``{"status": "ok"}`` when the database answers,
else 503; ``/health/live`` answers 200 while the process serves, database or not.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from wharf.resource_manager.api.deps import StateDep, authenticate
from wharf.resource_manager.api.metrics import CONTENT_TYPE

router = APIRouter(tags=["operations"])


@router.get("/health")
@router.get("/health/ready")
def health(state: StateDep) -> dict[str, str]:
    state.metrics.ping()
    return {"status": "ok"}


@router.get("/health/live")
def live() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/metrics", response_class=Response)
def metrics(request: Request, state: StateDep) -> Response:
    if not state.settings.metrics_public:
        authenticate(state, request.headers.get("authorization"))
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)
