"""A dynamic step given another step's future as an input (``wharf.execution.dynamic_waits``),
called, submitted or mapped, inline and isolated: a future of a step that failed starts no step
and names that step (the run's reason, as in a static pipeline); a future of a step with no
outputs is refused at the call (``after=`` orders steps); a step mapped over, or ``after=``, a
map whose one element failed does not start and names that element.

Before, a plain call given a failed step's future raised that step's own error (the run's
reason, in place of ``Step(s) failed: …``), and a future of a step with no outputs was waited
for in the function's thread and passed as ``None`` (a map's was refused as a parameter that
is no JSON)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.execution.test_dynamic_after import (
    TAKES_ITS_OUTPUT,
    _lines,
    _write,
    assert_not_started,
    evaluate,
    evaluate_input,
    process_workspace,
    steps_for,
    steps_of,
    workspace,
)
from wharf import pipeline, step, unmapped
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import StepExecutionError, StepInterfaceError
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


@step(enable_cache=False)
def breaks_on_one(n: int) -> int:
    if n == 1:
        raise ValueError("broken")
    return n


def isolated_if(isolated: bool, *steps: Any) -> tuple[Any, ...]:
    return tuple(s.with_options(runtime="isolated") if isolated else s for s in steps)


def mapped_over_a_failed_element(log: str, isolated: bool) -> None:
    mapped, upstream = isolated_if(isolated, evaluate_input, breaks_on_one)
    mapped.map(unmapped(log), upstream.map([0, 1])).result()


def called_after_a_map(log: str, isolated: bool) -> None:
    then, upstream = isolated_if(isolated, evaluate, breaks_on_one)
    then(log, after=upstream.map([0, 1]))


def submitted_after_a_map(log: str, isolated: bool) -> None:
    then, upstream = isolated_if(isolated, evaluate, breaks_on_one)
    then.submit(log, after=upstream.map([0, 1])).result()


def mapped_after_a_map(log: str, isolated: bool) -> None:
    then, upstream = isolated_if(isolated, evaluate, breaks_on_one)
    then.map([log], after=upstream.map([0, 1])).result()


AFTER_ONE = "was not started: it runs after step 'breaks_on_one_1', which failed."


@pytest.mark.parametrize(
    ("body", "expected", "not_started", "started"),
    [
        (
            mapped_over_a_failed_element,
            "Step 'evaluate_input_1' was not started: its input 'x' is output 'output' of "
            "step 'breaks_on_one_1', which failed.",
            "evaluate_input_1",
            ["evaluate start"],
        ),
        (called_after_a_map, f"Step 'evaluate' {AFTER_ONE}", "evaluate", []),
        (submitted_after_a_map, f"Step 'evaluate' {AFTER_ONE}", "evaluate", []),
        (mapped_after_a_map, f"Step 'evaluate_0' {AFTER_ONE}", "evaluate_0", []),
    ],
    ids=["map-over", "call-after", "submit-after", "map-after"],
)
@pytest.mark.parametrize("isolated", [False, True], ids=["inline", "isolated"])
def test_a_step_over_or_after_a_map_with_a_failed_element_does_not_start_and_names_it(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    body: Callable[[str, bool], None],
    expected: str,
    not_started: str,
    started: list[str],
    isolated: bool,
) -> None:
    """Checked as it was: the element that failed is named, and is the run's reason."""
    log = str(tmp_path / "order.log")
    got: list[str] = []
    ws: Workspace = request.getfixturevalue("process_workspace" if isolated else "workspace")

    @pipeline(dynamic=True, execution_mode="continue_on_failure", raise_on_failure=False)
    def p() -> None:
        try:
            body(log, isolated)
        except StepExecutionError as exc:
            got.append(str(exc))
            raise

    run = p.run_in(ws)
    assert got == [expected]
    assert run.status is ExecutionStatus.FAILED
    assert run.status_reason == "Step(s) failed: breaks_on_one_1.", run.status_reason
    assert _lines(log) == started
    found = steps_of(ws, run.id)
    assert not_started not in found
    assert found["breaks_on_one_0"].status is ExecutionStatus.COMPLETED
    assert (found["breaks_on_one_0"].pid is not None) is isolated  # its own process
