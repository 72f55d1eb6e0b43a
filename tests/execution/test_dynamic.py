"""The dynamic runner (``wharf.execution.dynamic``): how a map hands its values to its steps, and
how a run whose pipeline function raised (or exited) says why it failed."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wharf import RunFailedError, pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.execution.dynamic_futures import unmapped
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace.open(load_config({}, home=tmp_path / "home"))
    yield ws
    ws.close()


def steps_of(workspace: Workspace, run_id: Any) -> dict[str, Any]:
    page = workspace.store.steps.list(StepRunFilter(run_id=run_id), PageRequest(size=100))
    return {s.name: s for s in page.items}


@step(enable_cache=False)
def fetch(id: int, after: str = "") -> str:
    return f"{id}{after}"


def test_a_map_binds_its_values_to_parameters_named_like_call_options(
    workspace: Workspace,
) -> None:
    seen: dict[str, Any] = {}

    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        first = fetch(0)
        seen["ids"] = fetch.map([1, 2]).load()
        seen["both"] = fetch.map([3, 4], ["a", "b"]).load()
        seen["after"] = fetch.map([5], unmapped("z"), after=first).load()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert seen == {"ids": ["1", "2"], "both": ["3a", "4b"], "after": ["5z"]}
    found = steps_of(workspace, run.id)
    assert found["fetch_0"].spec.parameters == {"id": 1, "after": ""}
    assert found["fetch_2_1"].spec.parameters == {"id": 4, "after": "b"}
    assert found["fetch_3_0"].spec.parameters == {"id": 5, "after": "z"}
    assert found["fetch_3_0"].spec.upstream == ("fetch",)


@step(enable_cache=False)
def pair(a: int, b: int) -> int:
    return a + b


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        (
            lambda: pair(1),
            "The pipeline function raised: Step 'pair' is missing a value for argument 'b'.",
        ),
        (lambda: int("x"), "The pipeline function raised: ValueError: invalid literal"),
    ],
    ids=["wharf-error", "other-error"],
)
def test_a_run_whose_function_raised_says_so_before_a_colon(
    workspace: Workspace, call: Any, reason: str
) -> None:
    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        call()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    assert run.status_reason is not None and run.status_reason.startswith(reason)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (3, "The pipeline function exited with code 3 (sys.exit)"),
        (None, "The pipeline function exited with code 0 (sys.exit)"),
        ("bad config", "The pipeline function exited (sys.exit): bad config"),
    ],
)
def test_a_run_whose_function_calls_sys_exit_fails_saying_it_exited(
    workspace: Workspace, code: int | str | None, reason: str
) -> None:
    """Not 'The orchestrator failed: SystemExit(3)': the body ended the run, and the call
    returns (no SystemExit out of it)."""

    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        fetch(1)
        sys.exit(code)

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    assert run.status_reason == reason
    assert steps_of(workspace, run.id)["fetch"].status is ExecutionStatus.COMPLETED


def test_a_body_that_calls_sys_exit_raises_run_failed_with_the_exit_as_its_cause(
    workspace: Workspace,
) -> None:
    @pipeline(dynamic=True)
    def p() -> None:
        sys.exit(4)

    with pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    assert failed.value.run.status_reason == "The pipeline function exited with code 4 (sys.exit)"
    assert isinstance(failed.value.__cause__, SystemExit)


@step(enable_cache=False)
def plus_one(x: int) -> int:
    return x + 1


@step(enable_cache=False)
def plus_one_times_ten(x: int) -> int:
    return plus_one(x) * 10  # a step's code calling a step: a plain function call


def test_a_step_called_in_a_steps_code_is_a_plain_call_however_the_step_runs(
    workspace: Workspace,
) -> None:
    """Called (in the pipeline's thread) or submitted (in a pool thread), a step's own code
    gets the value of a step it calls, as outside any pipeline; before, a called step's code got
    an artifact handle (and the inner call was recorded as a step of the run)."""
    got = {}

    @pipeline(dynamic=True)
    def nested() -> None:
        got["called"] = plus_one_times_ten(1).load()
        got["submitted"] = plus_one_times_ten.submit(2).load()

    run = nested.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert got == {"called": 20, "submitted": 30}
    assert set(steps_of(workspace, run.id)) == {"plus_one_times_ten", "plus_one_times_ten_2"}


def test_an_output_of_another_run_is_refused_as_an_input(workspace: Workspace) -> None:
    """A handle kept from an earlier run named a step of that run as the input's producer: in
    the new run it became an edge to whatever step had that name (here the step itself)."""
    kept = {}

    @pipeline(dynamic=True)
    def first() -> None:
        kept["called"] = plus_one(1)
        kept["submitted"] = plus_one.submit(2)

    @pipeline(dynamic=True, raise_on_failure=False)
    def second(which: str) -> None:
        plus_one(kept[which])

    first.run_in(workspace)
    for which in ("called", "submitted"):
        run = second.run_in(workspace, which=which)
        assert run.status is ExecutionStatus.FAILED
        assert "of another run" in (run.status_reason or ""), run.status_reason
        assert ".load()" in (run.status_reason or "")
        assert steps_of(workspace, run.id) == {}


@step(enable_cache=False)
def fails_on_two(x: int) -> int:
    if x == 2:
        raise ValueError("two")
    return x


@pytest.mark.parametrize(
    ("mode", "started"),
    [("stop_on_failure", 4), ("fail_fast", 4), ("continue_on_failure", 6)],
)
def test_the_steps_waiting_to_start_do_not_start_after_a_failure_unless_the_run_continues(
    workspace: Workspace, mode: str, started: int
) -> None:
    """The pipeline's execution mode holds for a dynamic run's submitted steps: those still
    waiting for a thread (one at a time here) all started after one of them failed. A step the
    function calls after it caught the failure still runs: the function decides."""
    got: dict[str, str] = {}

    @pipeline(dynamic=True, max_parallelism=1, execution_mode=mode, raise_on_failure=False)
    def sweep() -> None:
        mapped = fails_on_two.map([0, 1, 2, 3, 4])
        try:
            mapped.load()
        except Exception as exc:
            got["map"] = str(exc)
        try:
            got["last"] = str(mapped[4].load())
        except Exception as exc:
            got["last"] = str(exc)
        got["later"] = str(fails_on_two(5).load())

    run = sweep.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    assert run.status_reason == "Step(s) failed: fails_on_two_2.", run.status_reason
    assert len(steps_of(workspace, run.id)) == started, steps_of(workspace, run.id)
    assert got["map"] == "Step 'fails_on_two_2' failed: ValueError: two"
    assert got["later"] == "5"
    if mode == "continue_on_failure":
        assert got["last"] == "4"
    else:
        assert got["last"] == (
            "Step 'fails_on_two_4' was not started: step 'fails_on_two_2' failed while it "
            f"waited ({mode}; execution_mode='continue_on_failure' starts it)."
        )
