"""Ending a run that no orchestrating process has taken over and none ever will, as its
orchestrator's platform tells (an asynchronous Kubernetes run whose orchestrator pod's image
cannot be pulled): :func:`fail_if_never_starting`, which ``wharf runs logs RUN --follow`` calls
while the run waits to start.

Invariants: only a run still waiting to start (a placeholder, read again after the platform was
asked) is ended, failed with the orchestrator's reason, as a synchronous submitter would end it;
then what the platform holds for it is removed (``end_unstarted_run``: its Job and Secret); a
failure of that removal is said, never raised, since the run has ended.
"""

from __future__ import annotations

from dataclasses import dataclass

from wharf.core.enums import ComponentType, ExecutionStatus, MetadataResourceType
from wharf.core.errors import WharfError
from wharf.sdk.workspace import Workspace
from wharf.store.models import PipelineRunRecord


@dataclass(frozen=True)
class NeverStarted:
    """A run :func:`fail_if_never_starting` ended failed, and what it could not remove."""

    run: PipelineRunRecord
    left: str | None = None
    """Why what the platform holds for the run is left (None: removed)."""


def fail_if_never_starting(workspace: Workspace, run: PipelineRunRecord) -> NeverStarted | None:
    """End ``run`` failed if it still waits to start and its orchestrator says it never will
    (``BaseOrchestrator.why_never_starts``, with the reason as its status reason); None while
    it may start (or it started meanwhile). Raises :class:`WharfError` when the platform
    cannot be asked (e.g. the cluster is unreachable from here)."""
    store = workspace.store
    if not run.is_placeholder:
        return None
    stack_id = store.snapshots.get(run.snapshot_id).stack_id
    if stack_id is None:
        return None
    stack = store.stacks.get_stack(stack_id)
    orchestrator = workspace.component_instance(stack, ComponentType.ORCHESTRATOR)
    recorded = store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    metadata = {m.key: m.value for m in recorded}
    reason = orchestrator.why_never_starts(run, metadata)
    if reason is None or not store.runs.get(run.id).is_placeholder:
        return None  # it may start, or a process took it over while the platform was asked
    ended = store.runs.finish(run.id, ExecutionStatus.FAILED, reason)
    try:
        orchestrator.end_unstarted_run(ended, metadata)
    except WharfError as exc:
        return NeverStarted(ended, left=str(exc))
    return NeverStarted(ended)
