"""``wharf steps logs RUN STEP`` for a step that never started, or has not yet: one line on
stderr saying so (with its status), exit 0 as for a running step, instead of printing nothing."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import wharf
from tests.e2e import steps_lib
from wharf import pipeline
from wharf.config.spec import PipelineSpec, StepSpec
from wharf.core.enums import ExecutionStatus as S
from wharf.sdk.workspace import Workspace
from wharf.store.models import RunCreate, SnapshotCreate, StepRunCreate

LATER = "its output is stored when it ends (wharf runs logs RUN --follow prints it then)"


@pytest.fixture
def workspace(logs_workspace: Workspace) -> Workspace:
    return logs_workspace


def told(*args: str) -> str:
    """What ``wharf steps logs`` says on stderr, once it printed nothing and exited 0."""
    result = wharf("steps", "logs", *args)
    assert (result.returncode, result.stdout) == (0, ""), result.stderr
    return result.stderr


def test_a_step_its_failed_run_never_reached(workspace: Workspace) -> None:
    @pipeline(raise_on_failure=False)
    def p() -> None:
        steps_lib.double(steps_lib.merge(label="m", fail=True))

    run = p.run_in(workspace)
    assert run.status is S.FAILED
    assert told(run.name, "double") == (
        f"Step 'double' has no logs: it never started (run '{run.name}' failed).\n"
    )


def test_a_step_that_failed_before_it_started(workspace: Workspace) -> None:
    remote = steps_lib.whoami.with_options(step_operator="nonexistent")

    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        remote(label="op")

    run = p.run_in(workspace)
    assert told(run.name, "whoami") == (
        "Step 'whoami' has no logs: it never started (failed). Reason: Step 'whoami' asks for "
        "step operator 'nonexistent', which is not in the active stack (it has no step "
        "operator).\n"
    )


def test_a_queued_step_and_one_its_run_has_not_reached_yet(workspace: Workspace) -> None:
    store = workspace.store
    steps = {n: StepSpec(name=n, source=f"pkg:{n}", code_hash=n) for n in ("train", "report")}
    pipeline_record = store.pipelines.get_or_create(workspace.project.id, "waits")
    snapshot = store.snapshots.create(
        SnapshotCreate(
            project_id=workspace.project.id,
            pipeline_id=pipeline_record.id,
            spec=PipelineSpec(name="waits", steps=steps),
        )
    )
    run = store.runs.create(
        RunCreate(
            project_id=workspace.project.id,
            pipeline_id=pipeline_record.id,
            snapshot_id=snapshot.id,
            name="waiting-run",
            status=S.RUNNING,
            user_id=workspace.user.id,
        )
    )
    store.steps.create(StepRunCreate(run_id=run.id, name="train", status=S.QUEUED))
    assert told(run.name, "train") == f"Step 'train' is queued: it has not started yet; {LATER}.\n"
    assert told(run.name, "report") == (
        f"Step 'report' has not started yet (run 'waiting-run' is running); {LATER}.\n"
    )
