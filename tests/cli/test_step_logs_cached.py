"""``wharf steps logs RUN STEP`` for a cached step: one line on stderr naming the run it was
cached from, as ``wharf runs logs RUN`` names it, then the logs of the step run it reuses if
the store has them (exit 0), instead of printing nothing or that step's logs unannounced."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import wharf
from wharf import pipeline, step
from wharf.core.enums import ExecutionStatus as S
from wharf.sdk.workspace import Workspace
from wharf.store.models import PipelineRunRecord, StepRunFilter, StepRunRecord


@step
def shout(word: str) -> str:
    print(f"shouting {word}")
    return word


@pipeline(name="shouts")
def shouts() -> None:
    shout(word="hi")


@step
def hush() -> int:
    return 1


@pipeline(name="quiet")
def quiet() -> None:
    hush()


@pytest.fixture
def workspace(logs_workspace: Workspace) -> Workspace:
    return logs_workspace


def only_step(workspace: Workspace, run: PipelineRunRecord) -> StepRunRecord:
    (found,) = workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
    return found


def test_a_cached_step_names_the_run_it_was_cached_from(workspace: Workspace) -> None:
    first = shouts.run_in(workspace)
    second = shouts.run_in(workspace)
    original, cached = only_step(workspace, first), only_step(workspace, second)
    assert cached.status is S.CACHED and cached.original_step_run_id == original.id

    result = wharf("steps", "logs", second.name, "shout")
    assert (result.returncode, result.stdout) == (0, "shouting hi\n"), result.stderr
    assert result.stderr == f"Step 'shout' was cached from run {first.name}; its logs there:\n"
    by_id = wharf("steps", "logs", str(cached.id))
    assert (by_id.returncode, by_id.stdout, by_id.stderr) == (0, result.stdout, result.stderr)
    whole_run = wharf("runs", "logs", second.name)
    assert whole_run.stdout == f"[shout] cached from run {first.name}.\n"


def test_a_cached_step_whose_original_printed_nothing(workspace: Workspace) -> None:
    first = quiet.run_in(workspace)
    second = quiet.run_in(workspace)
    assert only_step(workspace, second).status is S.CACHED
    result = wharf("steps", "logs", second.name, "hush")
    assert (result.returncode, result.stdout) == (0, ""), result.stderr
    assert result.stderr == (
        f"Step 'hush' was cached from run {first.name}; it has no logs there.\n"
    )


def test_a_step_cached_from_a_deleted_run(workspace: Workspace) -> None:
    first = shouts.run_in(workspace)
    second = shouts.run_in(workspace)
    workspace.store.runs.delete(first.id)
    assert only_step(workspace, second).status is S.CACHED

    result = wharf("steps", "logs", second.name, "shout")
    assert (result.returncode, result.stdout) == (0, "shouting hi\n"), result.stderr
    assert result.stderr == "Step 'shout' was cached from run (deleted); its logs there:\n"
    assert wharf("runs", "logs", second.name).stdout == "[shout] cached from run (deleted).\n"
