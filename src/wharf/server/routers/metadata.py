"""``/api/v1/run_metadata``: values attached to runs, step runs and artifact versions, with the
permissions of the resource they are attached to."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Response

from wharf.core.enums import MetadataResourceType
from wharf.core.errors import EntityNotFoundError
from wharf.server.deps import Ctx, CtxDep
from wharf.server.routers._common import API_PREFIX, ERRORS, items_response, missing
from wharf.server.schemas.actions import MetadataBody
from wharf.server.schemas.responses import Items
from wharf.store.models import RunMetadataRecord

_KINDS = {
    MetadataResourceType.PIPELINE_RUN: "pipeline run",
    MetadataResourceType.STEP_RUN: "step run",
    MetadataResourceType.ARTIFACT_VERSION: "artifact version",
}


def _check(ctx: Ctx, kind: MetadataResourceType, resource_id: UUID, *, write: bool) -> None:
    if ctx.principal.acts_as_admin:
        return  # the store checks the resource itself
    scopes = ctx.state.scopes
    run_id = None
    project_wide = False
    if kind is MetadataResourceType.PIPELINE_RUN:
        project_id = scopes.run(resource_id).project_id
        run_id = resource_id
    elif kind is MetadataResourceType.STEP_RUN:
        info = scopes.step(resource_id)
        project_id, run_id = info.project_id, info.run_id
    else:
        project_id = scopes.version(resource_id)
        project_wide = True
    ctx.access.check(
        project_id,
        write=write,
        action="add run metadata" if write else "read run metadata",
        missing=missing(_KINDS[kind], resource_id),
        run_id=run_id,
        project_wide=project_wide,
    )


def build_router() -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/run_metadata", tags=["metadata"], responses=ERRORS)

    @router.post("", response_model=Items[RunMetadataRecord], status_code=201)
    def add_metadata(body: MetadataBody, ctx: CtxDep) -> Response:
        _check(ctx, body.resource_type, body.resource_id, write=True)
        records = ctx.store.run_metadata.add(body.resource_type, body.resource_id, body.values)
        return items_response(records, 201)

    @router.get("", response_model=Items[RunMetadataRecord])
    def list_metadata(
        ctx: CtxDep,
        resource_type: Annotated[MetadataResourceType, Query()],
        resource_id: Annotated[UUID, Query()],
    ) -> Response:
        try:
            _check(ctx, resource_type, resource_id, write=False)
        except EntityNotFoundError:
            return items_response([])  # what the store lists for an unknown resource
        return items_response(ctx.store.run_metadata.list(resource_type, resource_id))

    return router
