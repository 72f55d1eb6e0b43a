"""``/api/v1/artifacts`` and ``/api/v1/artifact_versions`` (single and batch creation).

Artifact versions are project-wide for a run token: its steps read their inputs (possibly
produced by other runs, for cached steps) and write their outputs in the run's project; a
version it writes is produced by a step of its own run, or by none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response

from wharf.server.auth.access import missing_project
from wharf.server.deps import Ctx, CtxDep
from wharf.server.routers._common import (
    API_PREFIX,
    ERRORS,
    check_producer,
    empty_page,
    items_response,
    json_response,
    list_scope,
    missing,
)
from wharf.server.schemas.actions import ArtifactVersionBatchBody
from wharf.server.schemas.filters import IdPrefixQuery, page_request
from wharf.server.schemas.responses import Items
from wharf.store.models import (
    ArtifactFilter,
    ArtifactRecord,
    ArtifactVersionCreate,
    ArtifactVersionFilter,
    ArtifactVersionRecord,
    Page,
    PageRequest,
)

PageDep = Annotated[PageRequest, Depends(page_request)]


def _check_create(ctx: Ctx, version: ArtifactVersionCreate) -> None:
    ctx.access.check(
        version.project_id,
        write=True,
        action="create artifact versions",
        missing=missing_project(version.project_id),
        project_wide=True,
    )
    check_producer(ctx, version.project_id, version.producer_step_run_id)


def _remember(ctx: Ctx, records: Sequence[ArtifactVersionRecord]) -> None:
    for record in records:
        ctx.state.scopes.version.remember(record.id, record.project_id)


def build_router() -> APIRouter:
    router = APIRouter(prefix=API_PREFIX, tags=["artifacts"], responses=ERRORS)

    @router.post("/artifact_versions", response_model=ArtifactVersionRecord, status_code=201)
    def create_version(body: ArtifactVersionCreate, ctx: CtxDep) -> Response:
        _check_create(ctx, body)
        record = ctx.store.artifacts.create_version(body)
        _remember(ctx, [record])
        return json_response(record, 201)

    @router.post(
        "/artifact_versions/batch", response_model=Items[ArtifactVersionRecord], status_code=201
    )
    def create_versions(body: ArtifactVersionBatchBody, ctx: CtxDep) -> Response:
        """Create several versions in one transaction (all or nothing)."""
        for version in body.versions:
            _check_create(ctx, version)
        records = ctx.store.artifacts.create_versions(body.versions)
        _remember(ctx, records)
        return items_response(records, 201)

    @router.get("/artifact_versions", response_model=Page[ArtifactVersionRecord])
    def list_versions(
        ctx: CtxDep,
        page: PageDep,
        project_id: Annotated[UUID | None, Query()] = None,
        artifact_id: Annotated[UUID | None, Query()] = None,
        name: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
        producer_step_run_id: Annotated[UUID | None, Query()] = None,
        id_prefix: IdPrefixQuery = None,
    ) -> Response:
        scopes = ctx.state.scopes
        parent = None
        if artifact_id is not None:
            parent = lambda: scopes.artifact(artifact_id)  # noqa: E731
        elif producer_step_run_id is not None:
            parent = lambda: scopes.step(producer_step_run_id).project_id  # noqa: E731
        scope = list_scope(ctx, project_id, parent)
        if scope.empty:
            return json_response(empty_page(page))
        filter = ArtifactVersionFilter(
            project_id=scope.project_id,
            artifact_id=artifact_id,
            name=name,
            producer_step_run_id=producer_step_run_id,
            id_prefix=id_prefix,
        )
        return json_response(ctx.store.artifacts.list_versions(filter, page))

    @router.get("/artifact_versions/{version_id}", response_model=ArtifactVersionRecord)
    def get_version(version_id: UUID, ctx: CtxDep) -> Response:
        ctx.access.check(
            ctx.state.scopes.version(version_id),
            write=False,
            action="read artifact versions",
            missing=missing("artifact version", version_id),
            project_wide=True,
        )
        return json_response(ctx.store.artifacts.get_version(version_id))

    @router.get("/artifacts", response_model=Page[ArtifactRecord])
    def list_artifacts(
        ctx: CtxDep,
        page: PageDep,
        project_id: Annotated[UUID | None, Query()] = None,
        name: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
        id_prefix: IdPrefixQuery = None,
    ) -> Response:
        scope = list_scope(ctx, project_id, None)
        if scope.empty:
            return json_response(empty_page(page))
        filter = ArtifactFilter(project_id=scope.project_id, name=name, id_prefix=id_prefix)
        return json_response(ctx.store.artifacts.list(filter, page))

    @router.get("/artifacts/{artifact_id}", response_model=ArtifactRecord)
    def get_artifact(artifact_id: UUID, ctx: CtxDep) -> Response:
        ctx.access.check(
            ctx.state.scopes.artifact(artifact_id),
            write=False,
            action="read artifacts",
            missing=missing("artifact", artifact_id),
            project_wide=True,
        )
        return json_response(ctx.store.artifacts.get(artifact_id))

    return router
