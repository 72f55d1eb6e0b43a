"""Stopping a run from outside the process that orchestrates it (``Client.stop_run``).

Owns :func:`request_stop`. Invariants: the stop is recorded first (the run moves to stopping,
forced if asked), so the run's orchestrating process learns of it at its next heartbeat
whatever this process manages, and at once where it runs on this machine as this user (woken:
``wharf.execution.run_wake``); a forced stop then ends at once, through the backend that
started each one, the isolated steps this process can reach, and the rest is left to the
orchestrating process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wharf.core.enums import ComponentType, ExecutionStatus, MetadataResourceType
from wharf.sdk.workspace import Workspace
from wharf.store.models import PipelineRunRecord, RunUpdate, StepRunRecord


def request_stop(
    workspace: Workspace,
    run: PipelineRunRecord,
    *,
    force: bool,
    release: Callable[[StepRunRecord], None] | None,
) -> PipelineRunRecord:
    """Record the stop of the unfinished ``run`` and, with ``force``, end its isolated steps
    through their backends; a forced stop of a run that no process beats for ends it stopped
    at once, with its steps (``release`` frees their resource requests). The run as it is
    afterwards."""
    from wharf.execution.run_heartbeat import end_unattended
    from wharf.execution.run_stop import stop_recorded_steps
    from wharf.execution.run_wake import wake_run

    store = workspace.store
    if run.status is not ExecutionStatus.STOPPING or (force and not run.stop_forced):
        update = RunUpdate(status=ExecutionStatus.STOPPING, stop_forced=force or None)
        run = store.runs.update(run.id, update)
    wake_run(run.id)  # its orchestrator, if here: it hears of the stop now, not at its next beat
    if force:
        stop_recorded_steps(store, run.id, _step_backends(workspace, run))
        never_taken_over = run.orchestrator_host is None
        run = end_unattended(store, run, release=release)
        if never_taken_over and run.status.is_finished:
            _end_unstarted_run(workspace, run)
    return run


def _end_unstarted_run(workspace: Workspace, run: PipelineRunRecord) -> None:
    """Have the run's orchestrator remove what its platform still holds for a run no process
    took over (a Kubernetes Job whose pod never started)."""
    store = workspace.store
    stack_id = store.snapshots.get(run.snapshot_id).stack_id
    if stack_id is None:
        return
    stack = store.stacks.get_stack(stack_id)
    orchestrator = workspace.component_instance(stack, ComponentType.ORCHESTRATOR)
    recorded = store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    orchestrator.end_unstarted_run(run, {m.key: m.value for m in recorded})


def _step_backends(workspace: Workspace, run: PipelineRunRecord) -> Callable[[StepRunRecord], Any]:
    """The kind of backend that started each step of ``run``: its stack's step operator's for
    a step that names one, else its orchestrator's (None: the flavor has none)."""
    store = workspace.store
    stack_id = store.snapshots.get(run.snapshot_id).stack_id
    if stack_id is None:
        return lambda step: None
    stack = store.stacks.get_stack(stack_id)
    instance = workspace.component_instance
    recorded = store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    metadata = {m.key: m.value for m in recorded}  # where its submitter put its steps
    own = instance(stack, ComponentType.ORCHESTRATOR).run_step_backend(metadata)
    operator = None
    if ComponentType.STEP_OPERATOR in stack.components:
        operator = instance(stack, ComponentType.STEP_OPERATOR).step_backend()

    def backend_for(step: StepRunRecord) -> Any:
        named = step.spec is not None and step.spec.config.step_operator is not None
        return operator if named else own

    return backend_for
