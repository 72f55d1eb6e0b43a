"""Recording, starting and finishing a pipeline run record.

A pipeline call records its pipeline, snapshot and run together (:func:`record_run`). An
orchestrator that starts the run at once, in this process, has it recorded running from the
start (one write instead of a placeholder and its replacement); any other gets a placeholder
(initializing) that it replaces with the real run (running, with its orchestrator run id)
through ``get_or_create`` (:func:`start_run`). When the steps are done the run moves to its final
status (:func:`finish_run`), which tolerates a concurrent ``wharf runs stop``: a run that became
stopping ends stopped (or failed), never completed (``wharf.core.transitions.run_end``).

Stores whose ``runs`` offer ``RunRecordOperations`` (the SQL store) do the recording and the
finish in one transaction each; any other store gets the same effect from the plain methods.
"""

from __future__ import annotations

from typing import cast
from uuid import UUID

from wharf.config.spec import PipelineSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import IllegalTransitionError
from wharf.core.transitions import run_end
from wharf.execution.store_calls import offers
from wharf.store.models import (
    OrchestratorProcess,
    PipelineRecord,
    PipelineRunRecord,
    RunCreate,
    RunStart,
    RunUpdate,
    SnapshotCreate,
    SnapshotRecord,
)
from wharf.store.ports import RunRecordOperations, Store


def record_run(
    store: Store,
    project_id: UUID,
    pipeline_name: str,
    stack_id: UUID | None,
    spec: PipelineSpec,
    run: RunStart,
) -> tuple[PipelineRecord, SnapshotRecord, PipelineRunRecord]:
    """The pipeline (got or created), a new snapshot of ``spec`` and the run ``run`` of it."""
    runs = store.runs
    if offers(type(runs), RunRecordOperations):
        return cast(RunRecordOperations, runs).record(
            project_id, pipeline_name, stack_id, spec, run
        )
    pipeline = store.pipelines.get_or_create(project_id, pipeline_name)
    snapshot = store.snapshots.create(
        SnapshotCreate(project_id=project_id, pipeline_id=pipeline.id, stack_id=stack_id, spec=spec)
    )
    return pipeline, snapshot, runs.create(run.of(snapshot))


def start_run(
    store: Store,
    placeholder: PipelineRunRecord,
    orchestrator_run_id: str,
    orchestrator: OrchestratorProcess | None = None,
) -> PipelineRunRecord:
    """Replace ``placeholder`` with the run started (running) by the process ``orchestrator``
    (recorded with a first heartbeat: ``wharf.execution.run_heartbeat``)."""
    run, _created = store.runs.get_or_create(
        RunCreate(
            project_id=placeholder.project_id,
            pipeline_id=placeholder.pipeline_id,
            snapshot_id=placeholder.snapshot_id,
            name=placeholder.name,
            status=ExecutionStatus.RUNNING,
            orchestrator_run_id=orchestrator_run_id,
            user_id=placeholder.user_id,
            orchestrator=orchestrator,
        )
    )
    return run


def finishes_in_one_write(store: Store) -> bool:
    """Whether :func:`finish_run` reads the run's status in the write that ends it (then the
    engine needs no read of its own to learn of a stop that no step saw)."""
    return offers(type(store.runs), RunRecordOperations)


def finish_run(
    store: Store, run_id: UUID, status: ExecutionStatus, reason: str | None
) -> PipelineRunRecord:
    runs = store.runs
    if offers(type(runs), RunRecordOperations):
        return cast(RunRecordOperations, runs).finish(run_id, status, reason)
    for _ in range(3):
        current = runs.get(run_id)
        end = run_end(current.status, status, reason)
        if end is None:
            return current
        target, why = end
        try:
            return runs.update(run_id, RunUpdate(status=target, status_reason=why))
        except IllegalTransitionError:
            continue  # the status changed under us (a stop request); decide again
    return runs.get(run_id)
