"""What calling a pipeline that carries a :class:`~wharf.config.settings.Schedule` records.

A named schedule is recorded with the run; calling the same pipeline again keeps a schedule of
that name whose definition (pipeline and timing) is unchanged and refuses, naming
``wharf schedule delete``, one that differs; a new one whose end time has passed is refused
(it would never fire). On an orchestrator that fires schedules itself
(``BaseOrchestrator.schedules_runs``: Kubernetes), :func:`schedule_on` records the pipeline,
its snapshot and the schedule, hands the schedule to the orchestrator and runs nothing: the
call returns a :class:`Scheduled`. A schedule the orchestrator refuses is not kept; a kept one
called on another stack than its own is refused (it would fire from both).
"""

from __future__ import annotations

import logging
import shlex
from datetime import UTC, datetime
from typing import Any, cast
from uuid import UUID

from wharf.config.cron import ended_problem
from wharf.config.settings import Schedule
from wharf.config.spec import PipelineSpec
from wharf.core.errors import EntityExistsError, InputError
from wharf.execution.services import RunServices
from wharf.orchestrators.base import BaseOrchestrator
from wharf.sdk.workspace import Workspace
from wharf.store.models import (
    PipelineRunRecord,
    ScheduleCreate,
    ScheduleFilter,
    ScheduleRecord,
    SnapshotCreate,
)

logger = logging.getLogger(__name__)

DEFINITION_FIELDS = (
    "pipeline_id",
    "cron_expression",
    "interval_seconds",
    "run_once_start_time",
    "start_time",
    "end_time",
    "catchup",
)
"""What makes two schedules of one name the same schedule."""


class Scheduled:
    """What a call of a scheduled pipeline returns when the stack's orchestrator fires the
    schedule's runs itself (``schedules_runs``, e.g. Kubernetes): no run was made now; the
    recorded schedule is :attr:`schedule`. Anything a run would have tells why it is missing."""

    def __init__(self, schedule: ScheduleRecord) -> None:
        self.schedule = schedule

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"No run was made (so no '{name}'): the pipeline was scheduled as "
            f"'{self.schedule.name}', and its orchestrator starts its runs; see them with "
            "`wharf runs list`, and the schedule as `.schedule`."
        )

    def __repr__(self) -> str:
        return f"<pipeline scheduled as '{self.schedule.name}': no run now>"


def schedule_on(
    pipeline_name: str,
    workspace: Workspace,
    orchestrator: BaseOrchestrator,
    stack_id: UUID,
    spec: PipelineSpec,
    services: RunServices,
) -> PipelineRunRecord:
    """Record the pipeline, its snapshot and its schedule and hand the schedule to
    ``orchestrator``, which fires its runs (nothing runs now, no run is recorded). A
    schedule this call recorded is deleted again if the orchestrator refuses it."""
    assert spec.config.schedule is not None
    store = workspace.store
    pipeline = store.pipelines.get_or_create(workspace.project.id, pipeline_name)
    snapshot = store.snapshots.create(
        SnapshotCreate(
            project_id=workspace.project.id,
            pipeline_id=pipeline.id,
            stack_id=stack_id,
            spec=spec,
        )
    )
    record, created = record_schedule(
        pipeline_name,
        workspace,
        pipeline.id,
        snapshot.id,
        spec.config.schedule,
        fired_by_orchestrator=True,
    )
    if record.snapshot_id != snapshot.id:  # an unchanged schedule keeps its own snapshot
        snapshot = store.snapshots.get(record.snapshot_id)
        _check_same_stack(record, snapshot.stack_id, stack_id, workspace)
    try:
        orchestrator.schedule(snapshot, record, services)
    except BaseException:
        if created:
            store.schedules.delete(record.id)
        raise
    # Typed as the run a call returns (as NOT_RUN is): callers that only run keep their types.
    return cast(PipelineRunRecord, Scheduled(record))


def _check_same_stack(
    record: ScheduleRecord, kept_on: UUID | None, called_on: UUID, workspace: Workspace
) -> None:
    """A kept schedule stays on the stack it was scheduled on (the one ``wharf schedule
    pause/resume/delete`` reach, through its snapshot): handing it to another stack's
    orchestrator too would fire it twice, once from a place those commands never find."""
    if kept_on == called_on:
        return
    stacks = workspace.store.stacks
    there = "no stack" if kept_on is None else f"stack '{stacks.get_stack(kept_on).name}'"
    raise EntityExistsError(
        f"Schedule '{record.name}' is on {there}, not on stack "
        f"'{stacks.get_stack(called_on).name}': to move it, delete it first "
        f"(`wharf schedule delete {shlex.quote(record.name)}`), or give this Schedule another name."
    )


def record_schedule(
    pipeline_name: str,
    workspace: Workspace,
    pipeline_id: Any,
    snapshot_id: Any,
    schedule: Schedule,
    *,
    fired_by_orchestrator: bool = False,
) -> tuple[ScheduleRecord, bool]:
    """The recorded schedule (an unchanged one kept) and whether this call created it."""
    name = schedule.name or f"{pipeline_name}-schedule"
    store = workspace.store
    wanted = ScheduleCreate(
        project_id=workspace.project.id,
        pipeline_id=pipeline_id,
        snapshot_id=snapshot_id,
        name=name,
        cron_expression=schedule.cron_expression,
        interval_seconds=schedule.interval_seconds,
        run_once_start_time=schedule.run_once_start_time,
        start_time=schedule.start_time,
        end_time=schedule.end_time,
        catchup=schedule.catchup,
    )
    found = store.schedules.list(ScheduleFilter(project_id=workspace.project.id, name=name))
    existing = found.items[0] if found.items else None
    created = None
    if existing is None:
        ended = ended_problem(schedule.end_time, datetime.now(UTC))
        if ended is not None:
            raise InputError(ended)
        try:
            created = store.schedules.create(wanted)
        except EntityExistsError:  # created meanwhile by another process
            existing = store.schedules.list(
                ScheduleFilter(project_id=workspace.project.id, name=name)
            ).items[0]
    if existing is not None and not _same_schedule(existing, wanted):
        raise EntityExistsError(
            f"The project already has a different schedule named '{name}': to replace it, "
            f"delete it first (`wharf schedule delete {shlex.quote(name)}`), or give this Schedule "
            "another name."
        )
    kept = "kept the existing schedule" if existing is not None else "recorded schedule"
    then = (
        "The orchestrator fires its runs; none runs now."
        if fired_by_orchestrator
        else "The local orchestrator does not fire schedules yet: it runs the pipeline once, now."
    )
    logger.log(  # a warning only where the schedule will not fire
        logging.INFO if fired_by_orchestrator else logging.WARNING,
        "Pipeline '%s': %s '%s' (replace it with `wharf schedule delete %s` and a new run). %s",
        pipeline_name,
        kept,
        name,
        name,
        then,
    )
    if created is not None:
        return created, True
    assert existing is not None
    return existing, False


def _same_schedule(existing: ScheduleRecord, wanted: ScheduleCreate) -> bool:
    """Whether a recorded schedule has the definition (pipeline and timing) of ``wanted``."""
    return all(
        _comparable(getattr(existing, f)) == _comparable(getattr(wanted, f))
        for f in DEFINITION_FIELDS
    )


def _comparable(value: Any) -> Any:
    """Datetimes compared as UTC instants (a store may return a naive UTC time)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value
