"""``/api/v1/runs``: create / get-or-create, a pipeline call's records (one transaction), read,
status, update (stop), delete, run tokens.

Viewers read; members create, update and stop runs. A run token reads its own run, and starts,
beats for and ends it (``wharf.server.auth.own_run``), nothing more. A run created by a user
records that user (``user_id`` is the caller's, whatever the body says); service accounts may
name the user they act for.
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import EntityNotFoundError
from wharf.server.auth import issue, own_run
from wharf.server.auth.access import missing_project
from wharf.server.auth.errors import PermissionDeniedError
from wharf.server.auth.principal import RunScope
from wharf.server.chosen_ids import as_chosen, stored_id
from wharf.server.deps import Ctx, CtxDep
from wharf.server.routers._common import (
    API_PREFIX,
    ERRORS,
    empty_page,
    items_response,
    json_response,
    list_scope,
    missing,
    no_content,
    same_project,
    sweep_time,
)
from wharf.server.schemas.actions import LostRunsBody, RunRecordBody, WireDatetime
from wharf.server.schemas.filters import IdPrefixQuery, page_request
from wharf.server.schemas.responses import (
    Items,
    RunGetOrCreateResponse,
    RunRecordResponse,
    RunStatusResponse,
    TokenResponse,
)
from wharf.server.scopes import RunInfo
from wharf.store.answers import LostRun, RunHeartbeatResponse
from wharf.store.lost_runs import end_lost_runs
from wharf.store.models import (
    OrchestratorProcess,
    Page,
    PageRequest,
    PipelineRunRecord,
    RunCreate,
    RunFilter,
    RunStart,
    RunUpdate,
)


def _check_create(ctx: Ctx, run: RunCreate) -> None:
    ctx.access.check(
        run.project_id, write=True, action="create runs", missing=missing_project(run.project_id)
    )
    scopes = ctx.state.scopes
    same_project(
        ctx,
        run.project_id,
        [
            ("pipeline", run.pipeline_id, scopes.pipeline),
            ("pipeline snapshot", run.snapshot_id, scopes.snapshot),
        ],
    )


def _run_info(
    ctx: Ctx, run_id: UUID, *, write: bool, action: str, its_token_may: bool = False
) -> RunInfo:
    """The run's project, once the caller may do ``action`` on it. A run token
    of the run may read it, and write it where ``its_token_may``; of another run, neither."""
    info = ctx.state.scopes.run(run_id)
    ctx.access.check(
        info.project_id,
        write=write,
        action=action,
        missing=missing("pipeline run", run_id),
        run_id=run_id if its_token_may or not write else None,
    )
    return info


def _start_own_run(ctx: Ctx, start: RunCreate, scope: RunScope) -> tuple[PipelineRunRecord, bool]:
    """``get_or_create`` for a run token: start the token's own run (``own_run.start_update``)
    -- that run only, never another placeholder, never a new run."""
    if start.project_id != scope.project_id:
        raise missing_project(start.project_id)()
    current = ctx.store.runs.get(scope.run_id)
    update = own_run.start_update(scope, current, start)
    run = current if update is None else ctx.store.runs.update(scope.run_id, update)
    if start.orchestrator is not None:
        # Its first heartbeat, as a start records it; a repeated start records it too, so a
        # start cut short between these two writes is completed by the client's retry.
        ctx.store.runs.update_heartbeat(scope.run_id, start.orchestrator)
        run = ctx.store.runs.get(scope.run_id)
    return run, update is not None


def _as_caller(ctx: Ctx, run: RunCreate) -> RunCreate:
    """``run`` as stored: its user the caller (a user's), its chosen id project-scoped."""
    update = {"id": stored_id("pipeline_run", run.project_id, run.id)}
    principal = ctx.principal
    if principal.kind == "user" and run.user_id != principal.id:
        update["user_id"] = principal.id
    return run.model_copy(update=update)


def _start_as_caller(ctx: Ctx, project_id: UUID, start: RunStart) -> RunStart:
    """``start`` as stored, as :func:`_as_caller` stores a run (and its snapshot's chosen id
    as ``POST /snapshots`` does)."""
    update: dict[str, Any] = {
        "id": stored_id("pipeline_run", project_id, start.id),
        "snapshot_id": stored_id("pipeline_snapshot", project_id, start.snapshot_id),
    }
    principal = ctx.principal
    if principal.kind == "user" and start.user_id != principal.id:
        update["user_id"] = principal.id
    return start.model_copy(update=update)


def _remember(ctx: Ctx, run: PipelineRunRecord) -> None:
    ctx.state.scopes.run.remember(run.id, RunInfo(run.project_id))


def _visible(ctx: Ctx, project_id: UUID) -> bool:
    return ctx.principal.is_admin or project_id in ctx.access.roles()


def _writable(ctx: Ctx, run_id: UUID) -> bool:
    try:
        _run_info(ctx, run_id, write=True, action="end runs whose orchestrator is gone")
    except (EntityNotFoundError, PermissionDeniedError):
        return False
    return True


def build_router() -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/runs", tags=["runs"], responses=ERRORS)

    @router.post("", response_model=PipelineRunRecord, status_code=201)
    def create_run(body: RunCreate, ctx: CtxDep) -> Response:
        _check_create(ctx, body)
        stored = _as_caller(ctx, body)
        with as_chosen([(body.id, stored.id)]):
            run = ctx.store.runs.create(stored)
        _remember(ctx, run)
        return json_response(run, 201)

    @router.post("/get_or_create", response_model=RunGetOrCreateResponse)
    def get_or_create_run(body: RunCreate, ctx: CtxDep) -> Response:
        """The run ``body`` starts (its placeholder replaced) or creates. A run token may only
        start its own run."""
        scope = ctx.principal.run
        if scope is not None:
            run, created = _start_own_run(ctx, body, scope)
            return json_response(RunGetOrCreateResponse(run=run, created=created))
        _check_create(ctx, body)
        stored = _as_caller(ctx, body)
        with as_chosen([(body.id, stored.id)]):
            run, created = ctx.store.runs.get_or_create(stored)
        _remember(ctx, run)
        return json_response(RunGetOrCreateResponse(run=run, created=created))

    @router.post("/record", response_model=RunRecordResponse, status_code=201)
    def record_run(body: RunRecordBody, ctx: CtxDep) -> Response:
        """A pipeline call's records in one transaction (``runs.record``): its pipeline (got
        or created), snapshot and run, all or nothing, so a refused run leaves no snapshot.
        Repeated under the run's and snapshot's chosen ids, it answers what it wrote."""
        project_id = body.project_id
        ctx.access.check(
            project_id, write=True, action="create runs", missing=missing_project(project_id)
        )
        start = _start_as_caller(ctx, project_id, body.run)
        chosen = [(body.run.id, start.id), (body.run.snapshot_id, start.snapshot_id)]
        with as_chosen(chosen):
            pipeline, snapshot, run = ctx.store.runs.record(
                project_id, body.pipeline_name, body.stack_id, body.spec, start
            )
        scopes = ctx.state.scopes
        scopes.pipeline.remember(pipeline.id, project_id)
        scopes.snapshot.remember(snapshot.id, project_id)
        _remember(ctx, run)
        recorded = RunRecordResponse(pipeline=pipeline, snapshot=snapshot, run=run)
        return json_response(recorded, 201)

    @router.get("", response_model=Page[PipelineRunRecord])
    def list_runs(
        ctx: CtxDep,
        page: Annotated[PageRequest, Depends(page_request)],
        project_id: Annotated[UUID | None, Query()] = None,
        pipeline_id: Annotated[UUID | None, Query()] = None,
        snapshot_id: Annotated[UUID | None, Query()] = None,
        name: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
        status: Annotated[ExecutionStatus | None, Query()] = None,
        orchestrator_run_id: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
        id_prefix: IdPrefixQuery = None,
    ) -> Response:
        ctx.access.require_account("list runs")
        scopes = ctx.state.scopes
        parent = None
        if pipeline_id is not None:
            parent = lambda: scopes.pipeline(pipeline_id)  # noqa: E731
        elif snapshot_id is not None:
            parent = lambda: scopes.snapshot(snapshot_id)  # noqa: E731
        scope = list_scope(ctx, project_id, parent)
        if scope.empty:
            return json_response(empty_page(page))
        filter = RunFilter(
            project_id=scope.project_id,
            pipeline_id=pipeline_id,
            snapshot_id=snapshot_id,
            name=name,
            status=status,
            orchestrator_run_id=orchestrator_run_id,
            id_prefix=id_prefix,
        )
        return json_response(ctx.store.runs.list(filter, page))

    @router.get("/sweep_candidates", response_model=Items[PipelineRunRecord])
    def sweep_candidates(
        ctx: CtxDep,
        now: Annotated[WireDatetime, Query()],
        host: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
    ) -> Response:
        """Running or stopping runs whose orchestrator's heartbeat deadline passed before
        ``now``, or whose orchestrator runs on ``host`` (the caller checks those processes)."""
        ctx.access.require_account("sweep runs")
        found = ctx.store.runs.list_sweep_candidates(sweep_time(ctx, now), host)
        return items_response([r for r in found if _visible(ctx, r.project_id)])

    @router.post("/lost", response_model=Items[LostRun])
    def fail_lost_orchestrators(body: LostRunsBody, ctx: CtxDep) -> Response:
        """End failed the runs whose orchestrator's heartbeat deadline passed, but those of
        ``spared`` (runs the caller may write whose orchestrator it saw alive on its machine),
        and those of ``orphaned`` (runs the caller may write whose orchestrator it saw gone on
        its machine); their unfinished steps end failed and give back their resource requests.
        Ids of runs the caller may not write are ignored, as unknown ones are: a caller neither
        keeps another project's runs alive nor learns whether they exist."""
        ctx.access.require_account("sweep runs")
        orphaned = [run_id for run_id in body.orphaned if _writable(ctx, run_id)]
        spared = [run_id for run_id in body.spared if _writable(ctx, run_id)]
        now = sweep_time(ctx, body.now)
        lost = end_lost_runs(ctx.store, now, orphaned, spared, release=ctx.state.release_ended)
        return items_response([r for r in lost if _visible(ctx, r.run.project_id)])

    @router.put("/{run_id}/heartbeat", response_model=RunHeartbeatResponse)
    def run_heartbeat(run_id: UUID, body: OrchestratorProcess, ctx: CtxDep) -> Response:
        """The orchestrating process of the run is alive; the answer says whether to stop."""
        _run_info(ctx, run_id, write=True, action="send run heartbeats", its_token_may=True)
        return json_response(ctx.store.runs.update_heartbeat(run_id, body))

    @router.get("/{run_id}", response_model=PipelineRunRecord)
    def get_run(run_id: UUID, ctx: CtxDep) -> Response:
        _run_info(ctx, run_id, write=False, action="read runs")
        return json_response(ctx.store.runs.get(run_id))

    @router.get("/{run_id}/status", response_model=RunStatusResponse)
    def get_run_status(run_id: UUID, ctx: CtxDep) -> Response:
        _run_info(ctx, run_id, write=False, action="read runs")
        return json_response(RunStatusResponse(status=ctx.store.runs.get_status(run_id)))

    @router.patch("/{run_id}", response_model=PipelineRunRecord)
    def update_run(run_id: UUID, body: RunUpdate, ctx: CtxDep) -> Response:
        """Change a run's status (e.g. ``stopping`` to stop it), reason or orchestrator run id.
        A run token may only end its own run."""
        scope = ctx.principal.run
        if scope is not None and scope.run_id == run_id:
            own_run.check_end(body)
        _run_info(ctx, run_id, write=True, action="update or stop runs", its_token_may=True)
        return json_response(ctx.store.runs.update(run_id, body))

    @router.delete("/{run_id}", status_code=204)
    def delete_run(run_id: UUID, ctx: CtxDep) -> Response:
        _run_info(ctx, run_id, write=True, action="delete runs")
        ctx.store.runs.delete(run_id)
        return no_content()

    @router.post("/{run_id}/token", response_model=TokenResponse)
    def create_run_token(run_id: UUID, ctx: CtxDep) -> Response:
        """A token for the run's processes: it reads the run and its snapshot and writes the
        run's steps, artifacts and heartbeats, nothing else."""
        ctx.access.require_account("issue run tokens")
        info = _run_info(ctx, run_id, write=True, action="issue run tokens")
        scope = RunScope(run_id, info.project_id, ctx.store.runs.get(run_id).snapshot_id)
        return json_response(issue.run_token(ctx.state, ctx.principal, scope))

    return router
