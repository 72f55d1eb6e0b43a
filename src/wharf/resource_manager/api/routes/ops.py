"""``GET /health`` (no token) and ``GET /metrics`` (any valid token).

``/health`` answers 200 ``{"status": "ok"}`` when the database answers, else 503.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from wharf.resource_manager.api.deps import CallerDep, StateDep
from wharf.resource_manager.api.metrics import CONTENT_TYPE

router = APIRouter(tags=["operations"])


@router.get("/health")
def health(state: StateDep) -> dict[str, str]:
    state.metrics.ping()
    return {"status": "ok"}


@router.get("/metrics", response_class=Response)
def metrics(state: StateDep, _caller: CallerDep) -> Response:
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)
