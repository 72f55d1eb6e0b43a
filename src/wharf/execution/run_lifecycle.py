"""Starting and finishing a pipeline run record.

A run starts as a placeholder (initializing) created by the client; the orchestrator replaces it
with the real run (running, with its orchestrator run id) through ``get_or_create`` and, when
the steps are done, moves it to its final status. Finishing tolerates a concurrent
``wharf runs stop``: a run that became stopping ends stopped (or failed), never completed.
"""

from __future__ import annotations

from uuid import UUID

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import IllegalTransitionError
from wharf.store.models import PipelineRunRecord, RunCreate, RunUpdate
from wharf.store.ports import Store


def start_run(
    store: Store, placeholder: PipelineRunRecord, orchestrator_run_id: str
) -> PipelineRunRecord:
    run, _created = store.runs.get_or_create(
        RunCreate(
            project_id=placeholder.project_id,
            pipeline_id=placeholder.pipeline_id,
            snapshot_id=placeholder.snapshot_id,
            name=placeholder.name,
            status=ExecutionStatus.RUNNING,
            orchestrator_run_id=orchestrator_run_id,
            user_id=placeholder.user_id,
        )
    )
    return run


def finish_run(
    store: Store, run_id: UUID, status: ExecutionStatus, reason: str | None
) -> PipelineRunRecord:
    for _ in range(3):
        current = store.runs.get(run_id)
        if current.status.is_finished:
            return current
        target = status
        if current.status is ExecutionStatus.STOPPING and status is not ExecutionStatus.FAILED:
            target, reason = ExecutionStatus.STOPPED, "Stopped on request."
        try:
            return store.runs.update(run_id, RunUpdate(status=target, status_reason=reason))
        except IllegalTransitionError:
            continue  # the status changed under us (a stop request); decide again
    return store.runs.get(run_id)
