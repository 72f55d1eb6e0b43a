"""``/api/v1/schedules/{id}/token`` and ``/api/v1/schedules/{id}/runs``: a schedule's own
credential and the runs it fires.

An account that may create runs in the schedule's project issues the schedule's token (never a
run or schedule token). A firing -- by that token or by such an account -- gets or creates the
run of the schedule's snapshot with the orchestrator run id it names, recorded with the schedule,
and a run token for it (``wharf.server.auth.own_schedule`` says what else the token may do).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from wharf.core.enums import MetadataResourceType
from wharf.core.errors import EntityExistsError
from wharf.server.auth import issue, own_schedule
from wharf.server.auth.principal import RunScope, ScheduleScope
from wharf.server.deps import Ctx, CtxDep
from wharf.server.routers._common import API_PREFIX, ERRORS, json_response, missing
from wharf.server.schemas.responses import TokenResponse
from wharf.server.scopes import RunInfo
from wharf.store.column_rules import OrchestratorRunId
from wharf.store.models import PipelineRunRecord, RunCreate, RunFilter, ScheduleRecord


class ScheduledRunBody(BaseModel):
    """A firing: the orchestrator run id of the process it started (the same for each retry of
    that process, so a restarted one finds its run) and the name a new run gets."""

    model_config = ConfigDict(extra="forbid")

    orchestrator_run_id: Annotated[OrchestratorRunId, Field(min_length=1)]
    name: str = Field(min_length=1, max_length=255)


class ScheduledRun(BaseModel):
    run: PipelineRunRecord
    created: bool
    """False when an earlier firing of that orchestrator run id created the run."""
    access_token: str
    """A run token of ``run``."""
    token_type: str = "bearer"
    expires_in: float


def _schedule(ctx: Ctx, schedule_id: UUID, *, action: str) -> ScheduleRecord:
    ctx.access.check(
        ctx.state.scopes.schedule(schedule_id),
        write=True,
        action=action,
        missing=missing("schedule", schedule_id),
    )
    return ctx.store.schedules.get(schedule_id)


def _check_firer(ctx: Ctx, schedule_id: UUID) -> ScheduleRecord:
    """The schedule, once the caller may fire it: its own token (``check_route`` admitted it)
    whose issuer may still create runs, or an account that may create runs in its project."""
    principal = ctx.principal
    if principal.schedule is None:
        ctx.access.require_account("fire schedules")
        return _schedule(ctx, schedule_id, action="create runs")
    schedule = ctx.store.schedules.get(schedule_id)
    issuer_roles = ctx.state.accounts.memberships.roles_of(**principal.member_ids())
    role = issuer_roles.get(schedule.project_id)
    own_schedule.check_issuer_may_create(
        principal.is_admin or (role is not None and role.can_write), schedule
    )
    return schedule


def _fired_run(
    ctx: Ctx, schedule: ScheduleRecord, body: ScheduledRunBody
) -> tuple[PipelineRunRecord, bool]:
    store = ctx.store
    wanted = RunFilter(
        snapshot_id=schedule.snapshot_id, orchestrator_run_id=body.orchestrator_run_id
    )

    def found() -> PipelineRunRecord | None:
        runs = store.runs.list(wanted).items
        if not runs:
            return None
        records = store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, runs[0].id)
        own_schedule.check_fired_run(schedule, records)
        return runs[0]

    existing = found()
    if existing is not None:
        return existing, False
    own_schedule.check_may_create(schedule)
    own_schedule.check_in_window(schedule, datetime.fromtimestamp(ctx.state.clock(), UTC))
    principal = ctx.principal
    create = RunCreate(
        project_id=schedule.project_id,
        pipeline_id=schedule.pipeline_id,
        snapshot_id=schedule.snapshot_id,
        name=body.name,
        orchestrator_run_id=body.orchestrator_run_id,
        user_id=principal.id if principal.kind == "user" else None,
    )
    try:  # the run and its schedule together: a run without them would refuse every retry
        run = store.runs.create_with_metadata(create, own_schedule.fired_metadata(schedule))
    except EntityExistsError:
        raced = found()  # another firing of that orchestrator run id, at the same moment
        if raced is None:
            raise
        return raced, False
    ctx.state.scopes.run.remember(run.id, RunInfo(run.project_id))
    return run, True


def build_router() -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/schedules", tags=["schedules"], responses=ERRORS)

    @router.post("/{schedule_id}/token", response_model=TokenResponse)
    def create_schedule_token(schedule_id: UUID, ctx: CtxDep) -> Response:
        """A token for the processes the schedule fires: it reads the schedule and its
        snapshot and fires the schedule's runs (each with its own run token), nothing else;
        deleting the schedule revokes it."""
        ctx.access.require_account("issue schedule tokens")
        schedule = _schedule(ctx, schedule_id, action="create runs")
        scope = ScheduleScope(schedule.id, schedule.project_id, schedule.snapshot_id)
        return json_response(issue.schedule_token(ctx.state, ctx.principal, scope))

    @router.post("/{schedule_id}/runs", response_model=ScheduledRun)
    def fire_schedule(schedule_id: UUID, body: ScheduledRunBody, ctx: CtxDep) -> Response:
        """The run this firing runs (created, recorded with the schedule, unless an earlier
        firing with that orchestrator run id created it) and a run token for it. A paused
        schedule creates no run (403), nor one outside its start and end times (409)."""
        schedule = _check_firer(ctx, schedule_id)
        run, created = _fired_run(ctx, schedule, body)
        scope = RunScope(run.id, run.project_id, run.snapshot_id)
        token = issue.run_token(ctx.state, ctx.principal, scope)
        return json_response(
            ScheduledRun(
                run=run,
                created=created,
                access_token=token.access_token,
                expires_in=token.expires_in,
            )
        )

    return router
