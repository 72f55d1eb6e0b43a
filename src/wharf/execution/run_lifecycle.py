"""Starting a pipeline run that was recorded as a placeholder.

A pipeline call records its pipeline, snapshot and run together (``runs.record`` of
``wharf.store.ports``). An orchestrator that starts the run at once, in this process, has it
recorded running from the start (one write instead of a placeholder and its replacement); any
other gets a placeholder (initializing) that it replaces with the real run (running, with its
orchestrator run id) through ``get_or_create`` (:func:`start_run`). When the steps are done the
run moves to its final status with ``runs.finish``, which tolerates a concurrent ``wharf runs
stop``: a run that became stopping ends stopped (or failed), never completed
(``wharf.core.transitions.run_end``).
"""

from __future__ import annotations

from wharf.core.enums import ExecutionStatus
from wharf.store.models import OrchestratorProcess, PipelineRunRecord, RunCreate
from wharf.store.ports import Store


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
