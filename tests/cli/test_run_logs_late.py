"""``wharf runs logs RUN --follow`` (:class:`wharf.cli.run_logs.RunLogs`) for a step whose log
reaches the artifact store a moment after the step recorded its end, as on Kubernetes, where the
orchestrator pod copies a step pod's log when it cleans up the step's Job: the step is printed
once its log is there (or once the run has ended), never as an empty step. It used to be taken
as printed at its first poll after it ended, so its output never showed while following."""

from __future__ import annotations

from wharf import pipeline, step
from wharf.cli.run_logs import RunLogs
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.execution.log_capture import write_log
from wharf.sdk.client import Client
from wharf.sdk.workspace import Workspace
from wharf.store.models import RunCreate, StepRunCreate, StepRunFilter, StepRunUpdate

ARTIFACT_STORE = ComponentType.ARTIFACT_STORE


@step
def say() -> None:
    print("said it")


@pipeline
def talk() -> None:
    say()


def test_a_step_whose_log_arrives_after_its_end_is_printed_when_it_arrives(
    logs_workspace: Workspace,
) -> None:
    workspace = logs_workspace
    store = workspace.store
    done = talk.run_in(workspace)
    [ran] = store.steps.list(StepRunFilter(run_id=done.id)).items
    assert ran.logs_uri is not None
    run = store.runs.create(
        RunCreate(
            project_id=done.project_id,
            pipeline_id=done.pipeline_id,
            snapshot_id=done.snapshot_id,
            name="late-logs",
            status=ExecutionStatus.RUNNING,
        )
    )
    late_uri = ran.logs_uri.removesuffix(".log") + "-late.log"
    late = store.steps.create(
        StepRunCreate(run_id=run.id, name="say", status=ExecutionStatus.RUNNING, logs_uri=late_uri)
    )
    store.steps.update(late.id, StepRunUpdate(status=ExecutionStatus.COMPLETED))
    lines: list[str] = []
    with Client(workspace.config, store) as client:
        logs = RunLogs(client, run.name, lines.append)
        assert logs.poll(following=True) == (False, False)  # ended, its log not stored yet
        artifacts = workspace.component_instance(workspace.active_stack(), ARTIFACT_STORE)
        write_log(artifacts, late_uri, "said it\n")
        assert logs.poll(following=True) == (False, True)
        store.runs.finish(run.id, ExecutionStatus.COMPLETED, None)
        assert logs.poll(following=True) == (True, False)
    assert lines == ["[say] said it"]
