"""``/api/v1/schedules``: a new schedule fires its own project's pipeline from one of that
pipeline's snapshots, and has not ended already (:func:`wharf.config.cron.ended_problem`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response

from wharf.config.cron import ended_problem
from wharf.core.errors import InputError
from wharf.server.auth.access import missing_project
from wharf.server.deps import Ctx, CtxDep
from wharf.server.routers._common import (
    API_PREFIX,
    ERRORS,
    empty_page,
    json_response,
    list_scope,
    missing,
    no_content,
    same_project,
)
from wharf.server.schemas.actions import ScheduleActiveBody, ScheduleCreateBody
from wharf.server.schemas.filters import IdPrefixQuery, page_request
from wharf.store.models import Page, PageRequest, ScheduleFilter, ScheduleRecord


def _check(ctx: Ctx, schedule_id: UUID, *, write: bool, action: str) -> None:
    ctx.access.check(
        ctx.state.scopes.schedule(schedule_id),
        write=write,
        action=action,
        missing=missing("schedule", schedule_id),
    )


def _check_snapshot_of_pipeline(ctx: Ctx, body: ScheduleCreateBody) -> None:
    """A schedule fires runs of its pipeline from its snapshot: both must be of the schedule's
    project (an admin may name any; a member's of another project are missing, 404) and the
    snapshot one of that pipeline (400; a missing one is 404)."""
    store = ctx.store
    pipeline = store.pipelines.get(body.pipeline_id)
    snapshot = store.snapshots.get(body.snapshot_id)
    for kind, named, of in (
        ("Pipeline", f"'{pipeline.name}'", pipeline.project_id),
        ("Snapshot", str(snapshot.id), snapshot.project_id),
    ):
        if of != body.project_id:
            projects = store.projects
            raise InputError(
                f"{kind} {named} is of project '{projects.get(of).name}', not of project "
                f"'{projects.get(body.project_id).name}': a schedule fires a pipeline of its "
                "own project."
            )
    if snapshot.pipeline_id == body.pipeline_id:
        return
    of_snapshot = store.pipelines.get(snapshot.pipeline_id).name
    raise InputError(
        f"Snapshot {body.snapshot_id} is of pipeline '{of_snapshot}', not of pipeline "
        f"'{pipeline.name}': a schedule fires its own pipeline's snapshot."
    )


def build_router() -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/schedules", tags=["schedules"], responses=ERRORS)

    @router.post("", response_model=ScheduleRecord, status_code=201)
    def create_schedule(body: ScheduleCreateBody, ctx: CtxDep) -> Response:
        ctx.access.check(
            body.project_id,
            write=True,
            action="create schedules",
            missing=missing_project(body.project_id),
        )
        scopes = ctx.state.scopes
        same_project(
            ctx,
            body.project_id,
            [
                ("pipeline", body.pipeline_id, scopes.pipeline),
                ("pipeline snapshot", body.snapshot_id, scopes.snapshot),
            ],
        )
        _check_snapshot_of_pipeline(ctx, body)
        ended = ended_problem(body.end_time, datetime.fromtimestamp(ctx.state.clock(), UTC))
        if ended is not None:  # on the server's clock, as its firings are checked
            raise InputError(ended)
        return json_response(ctx.store.schedules.create(body), 201)

    @router.get("", response_model=Page[ScheduleRecord])
    def list_schedules(
        ctx: CtxDep,
        page: Annotated[PageRequest, Depends(page_request)],
        project_id: Annotated[UUID | None, Query()] = None,
        pipeline_id: Annotated[UUID | None, Query()] = None,
        name: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
        id_prefix: IdPrefixQuery = None,
    ) -> Response:
        ctx.access.require_account("list schedules")
        scope = list_scope(
            ctx,
            project_id,
            None if pipeline_id is None else lambda: ctx.state.scopes.pipeline(pipeline_id),
        )
        if scope.empty:
            return json_response(empty_page(page))
        filter = ScheduleFilter(
            project_id=scope.project_id, pipeline_id=pipeline_id, name=name, id_prefix=id_prefix
        )
        return json_response(ctx.store.schedules.list(filter, page))

    @router.get("/{schedule_id}", response_model=ScheduleRecord)
    def get_schedule(schedule_id: UUID, ctx: CtxDep) -> Response:
        _check(ctx, schedule_id, write=False, action="read schedules")
        return json_response(ctx.store.schedules.get(schedule_id))

    @router.put("/{schedule_id}/active", response_model=ScheduleRecord)
    def set_active(schedule_id: UUID, body: ScheduleActiveBody, ctx: CtxDep) -> Response:
        _check(ctx, schedule_id, write=True, action="pause or resume schedules")
        return json_response(ctx.store.schedules.set_active(schedule_id, body.active))

    @router.delete("/{schedule_id}", status_code=204)
    def delete_schedule(schedule_id: UUID, ctx: CtxDep) -> Response:
        _check(ctx, schedule_id, write=True, action="delete schedules")
        ctx.store.schedules.delete(schedule_id)
        return no_content()

    return router
