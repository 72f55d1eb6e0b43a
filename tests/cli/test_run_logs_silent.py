"""``wharf runs logs RUN`` of a run whose steps printed nothing, and ``wharf steps logs RUN STEP``
of a step that printed nothing: one line on stderr saying the output is empty (exit 0), instead
of printing nothing at all, which looked like a hang or a failure. Real runs of real pipelines,
read by the ``wharf`` command in subprocesses."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import wharf
from tests.e2e import steps_lib
from wharf import pipeline
from wharf.core.enums import ExecutionStatus as S
from wharf.sdk.workspace import Workspace
from wharf.store.models import RunCreate, SnapshotCreate


@pytest.fixture
def workspace(logs_workspace: Workspace) -> Workspace:
    return logs_workspace


def test_a_run_whose_steps_printed_nothing_says_so(workspace: Workspace) -> None:
    @pipeline(name="silent")
    def p() -> None:
        steps_lib.double(steps_lib.produce())

    run = p.run_in(workspace)
    assert run.status is S.COMPLETED
    once = wharf("runs", "logs", run.name)
    assert (once.returncode, once.stdout) == (0, ""), once.stderr
    assert once.stderr == f"Run '{run.name}' (completed): its steps wrote no output.\n"
    followed = wharf("runs", "logs", run.name, "--follow")
    assert (followed.returncode, followed.stdout) == (0, ""), followed.stderr
    assert followed.stderr.splitlines() == [
        f"Run '{run.name}' (completed): its steps wrote no output.",
        f"Run '{run.name}' ended completed.",
    ]
    step = wharf("steps", "logs", run.name, "double")
    assert (step.returncode, step.stdout) == (0, ""), step.stderr
    assert step.stderr == "Step 'double' (completed) wrote no output.\n"


def test_a_run_with_output_adds_no_line(workspace: Workspace) -> None:
    @pipeline(name="talks")
    def p() -> None:
        steps_lib.whoami(label="w")
        steps_lib.produce()

    run = p.run_in(workspace)
    once = wharf("runs", "logs", run.name)
    assert once.returncode == 0 and once.stdout.startswith("[whoami] hello from w")
    assert once.stderr == ""  # a silent step beside one that printed: nothing to say
    assert wharf("steps", "logs", run.name, "whoami").stderr == ""
    assert wharf("steps", "logs", run.name, "produce").stderr == (
        "Step 'produce' (completed) wrote no output.\n"
    )


def test_a_running_run_with_no_step_yet_says_so(workspace: Workspace) -> None:
    """A run whose orchestrator runs but has started no step (its first step is being
    prepared): not silence, which would look like a hang."""
    from wharf.config.spec import PipelineSpec

    store = workspace.store
    pipeline_record = store.pipelines.get_or_create(workspace.project.id, "starting")
    snapshot = store.snapshots.create(
        SnapshotCreate(
            project_id=workspace.project.id,
            pipeline_id=pipeline_record.id,
            spec=PipelineSpec(name="starting", steps={}),
        )
    )
    store.runs.create(
        RunCreate(
            project_id=workspace.project.id,
            pipeline_id=pipeline_record.id,
            snapshot_id=snapshot.id,
            name="starting-run",
            status=S.RUNNING,
            user_id=workspace.user.id,
            orchestrator_run_id="starting",
        )
    )
    once = wharf("runs", "logs", "starting-run")
    assert (once.returncode, once.stdout) == (0, ""), once.stderr
    assert once.stderr == (
        "Run 'starting-run' is running: no step has started yet (--follow waits for them).\n"
    )
