"""``/api/v1/steps``: step runs, their heartbeats, the cache lookup, the lost-heartbeat sweep,
and the batch / combined calls that keep the engine's per-step path at a few requests.

Invariants: a run token reads and writes the steps of its own run, and the cache lookup is open
to it within its project (caching reuses other runs' steps); no generic update sets a step's
process id, which only the step's own process records (:func:`_check_own_process`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response
from pydantic import Field

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import EntityNotFoundError, InputError
from wharf.server.auth.access import missing_project
from wharf.server.auth.errors import PermissionDeniedError
from wharf.server.chosen_ids import as_chosen, stored_id
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
    same_project,
    sweep_time,
)
from wharf.server.schemas.actions import (
    MAX_BATCH,
    Body,
    FindCachedOrCreateBody,
    FinishBody,
    HeartbeatBody,
    LostHeartbeatsBody,
    StepProcessBody,
    StepRunBatchBody,
    StepRunCreateBody,
    StepRunUpdateBody,
    WireDatetime,
)
from wharf.server.schemas.filters import IdPrefixQuery, name_value, page_request, parse_oneof
from wharf.server.schemas.responses import (
    CachedStepResponse,
    FinishResponse,
    Items,
)
from wharf.server.scopes import StepInfo
from wharf.store.answers import CachedOrCreated, HeartbeatResponse
from wharf.store.models import (
    ArtifactVersionCreate,
    Page,
    PageRequest,
    StepRunCreate,
    StepRunFilter,
    StepRunRecord,
    StepRunUpdate,
)

MAX_DECISIONS = 500
"""Most cache decisions one ``find_cached_or_create_many`` request may hold."""


class FindCachedOrCreateManyBody(Body):
    steps: list[StepRunCreateBody] = Field(max_length=MAX_DECISIONS)
    project_id: UUID
    now: WireDatetime
    record_hit: bool = False
    create: list[bool] | None = Field(default=None, max_length=MAX_BATCH)
    """Per step: whether a miss creates it (default: all do); one that may not answers null."""


class CachedOrCreatedItems(Body):
    items: list[CachedOrCreated | None]


NAME_FILTER = "A step name, or oneof:[...] with a JSON array of names."
STATUS_FILTER = "A status, or oneof:[...] with a JSON array of statuses."


def _check_create(ctx: Ctx, step: StepRunCreate) -> None:
    scopes = ctx.state.scopes
    project_id = scopes.run(step.run_id).project_id
    ctx.access.check(
        project_id,
        write=True,
        action="create step runs",
        missing=missing("pipeline run", step.run_id),
        run_id=step.run_id,
    )
    refs: list[tuple[str, UUID | None, Callable[[UUID], UUID]]] = [
        ("artifact version", v, scopes.version)
        for v in (*step.inputs.values(), *step.outputs.values())
    ]
    refs.append(("step run", step.original_step_run_id, lambda i: scopes.step(i).project_id))
    same_project(ctx, project_id, refs)


@contextmanager
def _stored(steps: Sequence[StepRunCreateBody]) -> Iterator[list[StepRunCreateBody]]:
    """``steps`` under the ids the server stores for the ids their caller chose, scoped by
    their run (``wharf.server.chosen_ids``); a conflict names the ids chosen."""
    stored = [s.model_copy(update={"id": stored_id("step_run", s.run_id, s.id)}) for s in steps]
    with as_chosen([(s.id, t.id) for s, t in zip(steps, stored, strict=True)]):
        yield stored


def _remember(ctx: Ctx, records: Sequence[StepRunRecord]) -> None:
    for record in records:
        ctx.state.scopes.step.remember(record.id, StepInfo(record.run_id, record.project_id))


def _step(ctx: Ctx, step_id: UUID, *, write: bool, action: str) -> StepInfo:
    info = ctx.state.scopes.step(step_id)
    ctx.access.check(
        info.project_id,
        write=write,
        action=action,
        missing=missing("step run", step_id),
        run_id=info.run_id,
    )
    return info


def _check_own_process(ctx: Ctx, step: StepInfo) -> None:
    """Refuse anyone but the step's own process: a run token of the step's run issued to that
    run's user (or to a service account, whose runs a machine runs). A member of the project,
    an admin's own login or another user's run token for the same run are refused, since the
    process id (with its host and start token) is what ``wharf runs stop --force`` signals."""
    principal = ctx.principal
    run = principal.run
    own = run is not None and run.run_id == step.run_id
    if own and principal.kind == "user":
        own = ctx.store.runs.get(step.run_id).user_id == principal.id
    if not own:
        raise PermissionDeniedError(
            "Only the step's own process records its process id (with a run token of the "
            "step's run, issued to the run's user)."
        )


def _check_outputs(ctx: Ctx, project_id: UUID, outputs: dict[str, UUID] | None) -> None:
    scopes = ctx.state.scopes
    same_project(
        ctx, project_id, [("artifact version", v, scopes.version) for v in (outputs or {}).values()]
    )


def _check_versions(ctx: Ctx, versions: Sequence[ArtifactVersionCreate], step: StepInfo) -> None:
    for version in versions:
        if version.project_id != step.project_id:
            raise InputError("The outputs of a step run belong to the step run's project.")
        check_producer(ctx, step.project_id, version.producer_step_run_id)


def build_router() -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/steps", tags=["steps"], responses=ERRORS)

    @router.post("", response_model=StepRunRecord, status_code=201)
    def create_step(body: StepRunCreateBody, ctx: CtxDep) -> Response:
        _check_create(ctx, body)
        with _stored([body]) as [step]:
            record = ctx.state.step_runs.create(step)
        _remember(ctx, [record])
        return json_response(record, 201)

    @router.post("/batch", response_model=Items[StepRunRecord], status_code=201)
    def create_steps(body: StepRunBatchBody, ctx: CtxDep) -> Response:
        """Create several step runs in one transaction (all or nothing)."""
        for step in body.steps:
            _check_create(ctx, step)
        with _stored(body.steps) as steps:
            records = ctx.state.step_runs.create_many(steps)
        _remember(ctx, records)
        return items_response(records, 201)

    @router.post("/find_cached_or_create", response_model=CachedOrCreated)
    def find_cached_or_create(body: FindCachedOrCreateBody, ctx: CtxDep) -> Response:
        """The cached step run for ``step.cache_key`` if there is one, with its output
        versions (nothing is created unless ``record_hit``: then the cached step run for
        ``step`` is recorded too), else the newly created ``step``."""
        # Also covers a recorded hit: it is ``step`` with the found step as its original and
        # its outputs, which the lookup took from this same project.
        _check_create(ctx, body.step)
        if ctx.state.scopes.run(body.step.run_id).project_id != body.project_id:
            raise InputError("The cache lookup must be in the project of the step's run.")
        with _stored([body.step]) as [step]:
            found = ctx.state.step_runs.find_cached_or_create(
                step, body.project_id, body.now, record_hit=body.record_hit
            )
        _remember(ctx, [found.step] if found.recorded is None else [found.step, found.recorded])
        for version in found.outputs.values():
            ctx.state.scopes.version.remember(version.id, version.project_id)
        return json_response(found)

    @router.post("/find_cached_or_create_many", response_model=CachedOrCreatedItems)
    def find_cached_or_create_many(body: FindCachedOrCreateManyBody, ctx: CtxDep) -> Response:
        """``find_cached_or_create`` of each step, answers in order (one transaction): the
        engine's cache decisions of several steps in one request."""
        scopes = ctx.state.scopes
        for step in body.steps:
            _check_create(ctx, step)
            if scopes.run(step.run_id).project_id != body.project_id:
                raise InputError("The cache lookup must be in the project of the step's run.")
        with _stored(body.steps) as steps:
            answers = ctx.state.step_runs.find_cached_or_create_many(
                steps, body.project_id, body.now, record_hit=body.record_hit, create=body.create
            )
        for found in answers:
            if found is None:
                continue
            _remember(ctx, [found.step] if found.recorded is None else [found.step, found.recorded])
            for version in found.outputs.values():
                scopes.version.remember(version.id, version.project_id)
        return json_response(CachedOrCreatedItems(items=answers))

    @router.get("", response_model=Page[StepRunRecord])
    def list_steps(
        ctx: CtxDep,
        page: Annotated[PageRequest, Depends(page_request)],
        project_id: Annotated[UUID | None, Query()] = None,
        run_id: Annotated[UUID | None, Query()] = None,
        name: Annotated[str | None, Query(description=NAME_FILTER)] = None,
        status: Annotated[str | None, Query(description=STATUS_FILTER)] = None,
        cache_key: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
        id_prefix: IdPrefixQuery = None,
    ) -> Response:
        limit = ctx.state.settings.max_filter_values
        names = parse_oneof("name", name, limit, name_value)
        statuses = parse_oneof("status", status, limit, ExecutionStatus)
        run = ctx.principal.run
        if run is not None and run_id != run.run_id:
            raise PermissionDeniedError("A run-scoped token lists only the steps of its run.")
        parent = None
        if run_id is not None:
            parent = lambda: ctx.state.scopes.run(run_id).project_id  # noqa: E731
        scope = list_scope(ctx, project_id, parent)
        if scope.empty:
            return json_response(empty_page(page))
        filter = StepRunFilter(
            project_id=scope.project_id,
            run_id=run_id,
            names=names,
            statuses=statuses,
            cache_key=cache_key,
            id_prefix=id_prefix,
        )
        return json_response(ctx.store.steps.list(filter, page))

    @router.get("/cached", response_model=CachedStepResponse)
    def find_cached(
        ctx: CtxDep,
        project_id: Annotated[UUID, Query()],
        cache_key: Annotated[str, Query(min_length=1, max_length=255)],
        now: Annotated[WireDatetime, Query()],
    ) -> Response:
        """The newest completed, unexpired step run of the project with this cache key."""
        ctx.access.check(
            project_id,
            write=False,
            action="look up cached steps",
            missing=missing_project(project_id),
            project_wide=True,
        )
        return json_response(
            CachedStepResponse(step=ctx.store.steps.find_cached(project_id, cache_key, now))
        )

    @router.post("/lost_heartbeats", response_model=Items[StepRunRecord])
    def fail_lost_heartbeats(body: LostHeartbeatsBody, ctx: CtxDep) -> Response:
        """Fail the unfinished step runs (of ``run_id``) whose heartbeat deadline passed."""
        if body.run_id is None:
            ctx.access.require_admin("sweep the steps of every run")
        elif not ctx.principal.acts_as_admin:
            try:  # a run the caller cannot see has no steps to sweep, as an unknown one
                info = ctx.state.scopes.run(body.run_id)
                ctx.access.check(
                    info.project_id,
                    write=True,
                    action="fail lost steps",
                    missing=missing("pipeline run", body.run_id),
                    run_id=body.run_id,
                )
            except EntityNotFoundError:
                return items_response([])
        now = sweep_time(ctx, body.now)
        return items_response(ctx.state.step_runs.fail_lost_heartbeats(now, body.run_id))

    @router.get("/{step_id}", response_model=StepRunRecord)
    def get_step(step_id: UUID, ctx: CtxDep) -> Response:
        _step(ctx, step_id, write=False, action="read step runs")
        return json_response(ctx.store.steps.get(step_id))

    @router.patch("/{step_id}", response_model=StepRunRecord)
    def update_step(step_id: UUID, body: StepRunUpdateBody, ctx: CtxDep) -> Response:
        info = _step(ctx, step_id, write=True, action="update step runs")
        _check_outputs(ctx, info.project_id, body.outputs)
        return json_response(ctx.state.step_runs.update(step_id, body))

    @router.put("/{step_id}/process", response_model=StepRunRecord)
    def record_process(step_id: UUID, body: StepProcessBody, ctx: CtxDep) -> Response:
        """Record the process the step runs in (``wharf runs stop --force`` signals it where
        host and start token match). Only the step's own process may: a run token of the
        step's run, issued to the run's user (or to a service account)."""
        info = _step(ctx, step_id, write=True, action="record step processes")
        _check_own_process(ctx, info)
        update = StepRunUpdate(pid=body.pid, pid_host=body.host, pid_start=body.start)
        return json_response(ctx.state.step_runs.update(step_id, update))

    @router.put("/{step_id}/heartbeat", response_model=HeartbeatResponse)
    def heartbeat(step_id: UUID, body: HeartbeatBody, ctx: CtxDep) -> Response:
        """Record a heartbeat; the answer tells the step whether it must stop."""
        _step(ctx, step_id, write=True, action="send heartbeats")
        return json_response(
            ctx.state.step_runs.update_heartbeat(step_id, body.liveness_timeout_seconds)
        )

    @router.post("/{step_id}/finish", response_model=FinishResponse)
    def finish(step_id: UUID, body: FinishBody, ctx: CtxDep) -> Response:
        """Create the step's output artifact versions, then apply the update (one request)."""
        info = _step(ctx, step_id, write=True, action="update step runs")
        _check_outputs(ctx, info.project_id, body.update.outputs)
        _check_versions(ctx, list(body.outputs.values()), info)
        step, outputs = ctx.state.step_runs.finish(step_id, body.update, body.outputs)
        for version in outputs.values():
            ctx.state.scopes.version.remember(version.id, version.project_id)
        return json_response(FinishResponse(step=step, outputs=outputs))

    return router
