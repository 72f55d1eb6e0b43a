"""A step that fails before it starts (:meth:`StepLauncher._fail_before_start`) is written as a
failed step run through a short store outage: named before the first try and its creation
retried (:mod:`wharf.execution.step_writes`), a try whose answer was lost is answered as written,
not written twice, and the outage never reaches the pipeline function.

A real local run of a dynamic pipeline, on a direct store on each backend (SQLite, PostgreSQL,
MariaDB), whose first step names a step operator the stack lacks; the function catches that
step's failure and calls another step. The store's step-run creates fail as in an outage (see
``test_step_write_outages``); the retries' backoff costs no time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import steps_lib
from tests.execution.test_step_write_outages import outage
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import StepExecutionError
from wharf.sdk.workspace import Workspace
from wharf.store.models import PipelineRunRecord, StepRunFilter
from wharf.store.sql import SqlStore

REASON = (
    "Step 'whoami' asks for step operator 'nonexistent', which is not in the active stack "
    "(it has no step operator)."
)


@pytest.fixture
def workspace(backend: SqlStore, tmp_path: Path) -> Iterator[Workspace]:
    """A workspace on the backend's (fresh, migrated) database, with no Resource Manager."""
    env = {"WHARF_STORE_URL": backend.url, "WHARF_RESOURCE_MANAGER": "none"}
    opened = Workspace.open(load_config(env, home=tmp_path / "home"))
    opened.sleep = lambda seconds: None  # the retries' backoff costs no time
    try:
        yield opened
    finally:
        opened.close()


def run_failing_first(workspace: Workspace) -> tuple[PipelineRunRecord, list[str]]:
    """The run, and the failures its function caught."""
    remote = steps_lib.whoami.with_options(step_operator="nonexistent")
    caught: list[str] = []

    @pipeline(dynamic=True, raise_on_failure=False)
    def fails_first() -> None:
        try:
            remote(label="op")
        except StepExecutionError as error:
            caught.append(str(error))
        steps_lib.whoami(label="then")

    return fails_first.run_in(workspace), caught


@pytest.mark.parametrize(
    "failures",
    [["after"], ["after", "before", "after"], ["before", "before"]],
    ids=["lost", "lost-down-lost", "down"],
)
def test_a_step_failed_before_it_started_is_written_once_through_an_outage(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch, failures: list[str]
) -> None:
    calls = outage(monkeypatch, "create", list(failures))
    run, caught = run_failing_first(workspace)
    assert calls[: len(failures) + 1] == [*failures, "ok"]  # retried until written
    assert caught == [f"Step 'whoami' failed: {REASON}"]  # the step's own failure, no outage
    steps = workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
    by_name = {s.name: s for s in steps}
    assert len(steps) == len(by_name) == 2  # the failed step once, and the next step
    failed = by_name["whoami"]
    assert (failed.status, failed.status_reason) == (S.FAILED, REASON)
    assert failed.start_time is None  # it never started
    assert by_name["whoami_2"].status is S.COMPLETED
    # The run ends as it does without an outage: failed for its failed step only.
    assert (run.status, run.status_reason) == (S.FAILED, "Step(s) failed: whoami.")
