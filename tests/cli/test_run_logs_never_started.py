"""``wharf runs logs RUN`` for steps that never started: one note line each, as ``wharf steps
logs RUN STEP`` words it, instead of nothing: a step of the pipeline that its run never
reached (once the run has finished), and a step that failed before it started (with its
reason)."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import wharf
from tests.e2e import steps_lib
from wharf import pipeline
from wharf.core.enums import ExecutionStatus as S
from wharf.sdk.workspace import Workspace


@pytest.fixture
def workspace(logs_workspace: Workspace) -> Workspace:
    return logs_workspace


def notes(run: str, step: str, *follow: str) -> tuple[str, str]:
    """What ``runs logs`` prints for the run, and what ``steps logs`` says of ``step``."""
    whole = wharf("runs", "logs", run, *follow)
    assert whole.returncode == 0, whole.stderr
    if follow:  # following ends saying how the run ended
        (ended,) = whole.stderr.splitlines()
        assert ended.startswith(f"Run '{run}' ended "), ended
    else:
        assert whole.stderr == ""
    one = wharf("steps", "logs", run, step)
    assert (one.returncode, one.stdout) == (0, ""), one.stderr
    return whole.stdout, one.stderr


@pytest.mark.parametrize("follow", [(), ("--follow",)], ids=["once", "follow"])
def test_a_step_its_failed_run_never_reached(workspace: Workspace, follow: tuple[str]) -> None:
    @pipeline(raise_on_failure=False)
    def p() -> None:
        steps_lib.double(steps_lib.merge(label="m", fail=True))

    run = p.run_in(workspace)
    assert run.status is S.FAILED
    whole, one = notes(run.name, "double", *follow)
    lines = whole.splitlines()
    never = f"has no logs: it never started (run '{run.name}' failed)."
    assert lines[-1] == f"[double] {never}"
    assert lines.count(lines[-1]) == 1
    assert one == f"Step 'double' {never}\n"


def test_a_step_that_failed_before_it_started(workspace: Workspace) -> None:
    remote = steps_lib.whoami.with_options(step_operator="nonexistent")

    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        remote(label="op")

    run = p.run_in(workspace)
    whole, one = notes(run.name, "whoami")
    reason = (
        "Step 'whoami' asks for step operator 'nonexistent', which is not in the active stack "
        "(it has no step operator)."
    )
    assert whole == f"[whoami] has no logs: it never started (failed). Reason: {reason}\n"
    assert one == f"Step 'whoami' has no logs: it never started (failed). Reason: {reason}\n"
