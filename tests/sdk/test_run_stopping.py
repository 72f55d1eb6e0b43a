"""``request_stop``: what stopping a run from outside its orchestrating process records."""

from __future__ import annotations

from tests.e2e import steps_lib
from wharf import pipeline
from wharf.core.enums import ExecutionStatus as S
from wharf.execution.run_heartbeat import UNATTENDED_REASON
from wharf.sdk.run_stopping import request_stop
from wharf.sdk.workspace import Workspace
from wharf.store.models import OrchestratorProcess, PipelineRunRecord, RunStart, RunUpdate

ELSEWHERE = OrchestratorProcess(host="another-host", pid=7, liveness_timeout_seconds=60)


@pipeline
def produce() -> None:
    steps_lib.produce(value=1)


def recorded(workspace: Workspace) -> PipelineRunRecord:
    """A run recorded as a submitter records it, before any process took it over."""
    _, _, run = workspace.store.runs.record(
        workspace.project.id,
        "produce",
        workspace.active_stack().id,
        produce.compile(),
        RunStart(name="produce-1"),
    )
    return run


def test_a_graceful_stop_only_records_the_stop(workspace: Workspace) -> None:
    run = request_stop(workspace, recorded(workspace), force=False, release=None)
    assert run.status is S.STOPPING and not run.stop_forced
    assert workspace.store.runs.get(run.id) == run  # left for its orchestrator to end
    again = request_stop(workspace, run, force=False, release=None)
    assert again == run  # a repeated graceful stop writes nothing


def test_a_forced_stop_of_a_run_nobody_took_over_ends_it_stopped(workspace: Workspace) -> None:
    graceful = request_stop(workspace, recorded(workspace), force=False, release=None)
    run = request_stop(workspace, graceful, force=True, release=None)
    assert run.status is S.STOPPED
    assert run.status_reason == UNATTENDED_REASON
    assert workspace.store.runs.get(run.id).stop_forced


def test_a_forced_stop_of_a_run_taken_over_is_left_to_its_orchestrator(
    workspace: Workspace,
) -> None:
    run = recorded(workspace)
    workspace.store.runs.update(
        run.id, RunUpdate(status=S.RUNNING, orchestrator_run_id="local-elsewhere")
    )
    workspace.store.runs.update_heartbeat(run.id, ELSEWHERE)
    taken = workspace.store.runs.get(run.id)
    stopped = request_stop(workspace, taken, force=True, release=None)
    assert stopped.status is S.STOPPING and stopped.stop_forced  # its heartbeat learns of it
