"""A dynamic step given another step's future as an input (``wharf.execution.dynamic_waits``),
called, submitted or mapped, inline and isolated: a future of a step that failed starts no step
and names that step (the run's reason, as in a static pipeline); a future of a step with no
outputs is refused at the call (``after=`` orders steps).

Before, a plain call given a failed step's future raised that step's own error (the run's
reason, in place of ``Step(s) failed: …``), and a future of a step with no outputs was waited
for in the function's thread and passed as ``None`` (a map's was refused as a parameter that
is no JSON)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.execution.test_dynamic_after import (
    TAKES_ITS_OUTPUT,
    _lines,
    _write,
    assert_not_started,
    evaluate_input,
    process_workspace,
    steps_for,
    steps_of,
    workspace,
)
from wharf import pipeline, step, unmapped
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import StepInterfaceError
from wharf.sdk.workspace import Workspace

__all__ = ["process_workspace", "workspace"]  # fixtures


def called_with_its_output(log: str, isolated: bool = False) -> None:
    failing, _, then = steps_for(isolated)
    then(log, failing.submit(log))


@pytest.mark.parametrize("mode", ["stop_on_failure", "continue_on_failure"])
def test_a_call_taking_a_failed_steps_output_does_not_start_and_names_it(
    workspace: Workspace, tmp_path: Path, mode: str
) -> None:
    log = str(tmp_path / "order.log")
    body = lambda: called_with_its_output(log)  # noqa: E731
    assert_not_started(workspace, log, body, mode, TAKES_ITS_OUTPUT, "breaks")


def test_an_isolated_call_taking_a_failed_steps_output_does_not_start(
    process_workspace: Workspace, tmp_path: Path
) -> None:
    log = str(tmp_path / "order.log")
    body = lambda: called_with_its_output(log, isolated=True)  # noqa: E731
    assert_not_started(
        process_workspace, log, body, "continue_on_failure", TAKES_ITS_OUTPUT, "breaks"
    )


@step(enable_cache=False)
def returns_nothing(log: str) -> None:
    _write(log, "nothing start")


NO_OUTPUTS = (
    "Input 'x' of step '{id}' got the future of step 'returns_nothing', which has no outputs; "
    "pass it as after= to run after that step."
)


@pytest.mark.parametrize(
    ("body", "step_id"),
    [
        (lambda log: evaluate_input(log, returns_nothing.submit(log)), "evaluate_input"),
        (lambda log: evaluate_input.submit(log, returns_nothing.submit(log)), "evaluate_input"),
        (
            lambda log: evaluate_input.map(unmapped(log), [returns_nothing.submit(log)]),
            "evaluate_input_0",
        ),
    ],
    ids=["call", "submit", "map"],
)
def test_a_future_of_a_step_with_no_outputs_is_refused_as_an_input(
    workspace: Workspace, tmp_path: Path, body: Callable[[str], object], step_id: str
) -> None:
    log = str(tmp_path / "order.log")
    got: list[str] = []

    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        try:
            body(log)
        except StepInterfaceError as exc:
            got.append(str(exc))
            raise

    run = p.run_in(workspace)
    expected = NO_OUTPUTS.format(id=step_id)
    assert got == [expected]
    assert run.status is ExecutionStatus.FAILED
    assert expected in (run.status_reason or ""), run.status_reason
    assert "evaluate start" not in _lines(log)
    assert step_id not in steps_of(workspace, run.id)
