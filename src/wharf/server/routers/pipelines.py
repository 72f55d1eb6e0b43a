"""``/api/v1/pipelines`` (get-or-create by name) and ``/api/v1/snapshots``."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response

from wharf.core.names import pipeline_name
from wharf.server.auth.access import missing_project
from wharf.server.chosen_ids import as_chosen, stored_id
from wharf.server.deps import CtxDep
from wharf.server.routers._common import (
    API_PREFIX,
    ERRORS,
    empty_page,
    json_response,
    list_scope,
    missing,
    same_project,
)
from wharf.server.schemas.actions import PipelineBody
from wharf.server.schemas.filters import IdPrefixQuery, page_request
from wharf.store.models import (
    Page,
    PageRequest,
    PipelineFilter,
    PipelineRecord,
    SnapshotCreate,
    SnapshotRecord,
)


def build_router() -> APIRouter:
    router = APIRouter(prefix=API_PREFIX, tags=["pipelines"], responses=ERRORS)

    @router.post("/pipelines", response_model=PipelineRecord)
    def get_or_create_pipeline(body: PipelineBody, ctx: CtxDep) -> Response:
        """The pipeline of that name in the project, created if missing. The name follows the
        SDK's rule (it names a folder of the artifact store: no slash, not ``..``)."""
        ctx.access.check(
            body.project_id,
            write=True,
            action="create pipelines",
            missing=missing_project(body.project_id),
        )
        name = pipeline_name(body.name)
        record = ctx.store.pipelines.get_or_create(body.project_id, name)
        ctx.state.scopes.pipeline.remember(record.id, record.project_id)
        return json_response(record)

    @router.get("/pipelines", response_model=Page[PipelineRecord])
    def list_pipelines(
        ctx: CtxDep,
        page: Annotated[PageRequest, Depends(page_request)],
        project_id: Annotated[UUID | None, Query()] = None,
        name: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
        id_prefix: IdPrefixQuery = None,
    ) -> Response:
        scope = list_scope(ctx, project_id, None)
        if scope.empty:
            return json_response(empty_page(page))
        filter = PipelineFilter(project_id=scope.project_id, name=name, id_prefix=id_prefix)
        return json_response(ctx.store.pipelines.list(filter, page))

    @router.get("/pipelines/{pipeline_id}", response_model=PipelineRecord)
    def get_pipeline(pipeline_id: UUID, ctx: CtxDep) -> Response:
        ctx.access.check(
            ctx.state.scopes.pipeline(pipeline_id),
            write=False,
            action="read pipelines",
            missing=missing("pipeline", pipeline_id),
        )
        return json_response(ctx.store.pipelines.get(pipeline_id))

    @router.post("/snapshots", response_model=SnapshotRecord, status_code=201)
    def create_snapshot(body: SnapshotCreate, ctx: CtxDep) -> Response:
        ctx.access.check(
            body.project_id,
            write=True,
            action="create snapshots",
            missing=missing_project(body.project_id),
        )
        same_project(
            ctx, body.project_id, [("pipeline", body.pipeline_id, ctx.state.scopes.pipeline)]
        )
        stored = body.model_copy(
            update={"id": stored_id("pipeline_snapshot", body.project_id, body.id)}
        )
        with as_chosen([(body.id, stored.id)]):
            record = ctx.store.snapshots.create(stored)
        ctx.state.scopes.snapshot.remember(record.id, record.project_id)
        return json_response(record, 201)

    @router.get("/snapshots/{snapshot_id}", response_model=SnapshotRecord)
    def get_snapshot(snapshot_id: UUID, ctx: CtxDep) -> Response:
        ctx.access.check(
            ctx.state.scopes.snapshot(snapshot_id),
            write=False,
            action="read snapshots",
            missing=missing("pipeline snapshot", snapshot_id),
            snapshot_id=snapshot_id,
        )
        return json_response(ctx.store.snapshots.get(snapshot_id))

    return router
