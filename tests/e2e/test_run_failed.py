"""A pipeline call whose run ends failed raises ``RunFailedError`` (``raise_on_failure=False``
returns the run); a dynamic body that raises fails the run with its traceback logged once;
mapped steps are named by index."""

from __future__ import annotations

import logging

import pytest

from tests.e2e import steps_lib
from wharf import Client, RunFailedError, get_step_context, pipeline, step
from wharf.core.enums import ExecutionStatus
from wharf.execution.dynamic_futures import unmapped
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter


class TrainingDiverged(Exception):
    pass


@step(enable_cache=False)
def diverge(rate: float) -> float:
    raise TrainingDiverged(f"loss is nan at rate {rate}")


@step(enable_cache=False)
def add(a: int, b: int = 0) -> int:
    return a + b


def step_names(workspace: Workspace, run_id) -> list[str]:  # type: ignore[no-untyped-def]
    page = PageRequest(sort="asc", size=1000)
    return [s.name for s in workspace.store.steps.list(StepRunFilter(run_id=run_id), page).items]


def test_a_failed_run_raises_with_the_steps_own_exception(workspace: Workspace) -> None:
    @pipeline
    def p() -> None:
        diverge(rate=0.5)

    with pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    error = failed.value
    assert isinstance(error.__cause__, TrainingDiverged)  # raised in this process: chained
    assert str(error.__cause__) == "loss is nan at rate 0.5"
    assert error.step_reasons == {"diverge": "TrainingDiverged: loss is nan at rate 0.5"}
    recorded = workspace.store.runs.get(error.run.id)  # recorded before it was raised
    assert recorded.status is ExecutionStatus.FAILED and recorded == error.run
    assert str(error).startswith(f"Pipeline run '{error.run.name}' failed: ")
    assert "step 'diverge': TrainingDiverged: loss is nan at rate 0.5" in str(error)


def attempt_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    names = ("wharf.execution.attempts", "wharf.sdk.run_failure")
    return [r for r in caplog.records if r.name in names]


@step(enable_cache=False, retry={"max_retries": 1})
def diverge_twice() -> float:
    raise TrainingDiverged(f"attempt {get_step_context().step_run.attempt}")


def test_a_failed_steps_traceback_is_shown_once(
    workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    @pipeline
    def p() -> None:
        diverge_twice()
        diverge(rate=3.0)

    with caplog.at_level(logging.ERROR), pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    cause = failed.value.__cause__
    assert isinstance(cause, TrainingDiverged)
    logs = {r.getMessage(): r.exc_info for r in attempt_logs(caplog)}
    follows = " (its traceback follows with the RunFailedError)"
    # A retried attempt's traceback is logged at once; a last attempt's follows with the
    # RunFailedError if chained there, else it is logged at the run's end.
    assert logs.pop("Step 'diverge_twice' attempt 1 failed: TrainingDiverged: attempt 1")
    assert not logs.pop(
        f"Step 'diverge_twice' attempt 2 failed: TrainingDiverged: attempt 2{follows}"
    )
    assert not logs.pop(
        f"Step 'diverge' attempt 1 failed: TrainingDiverged: loss is nan at rate 3.0{follows}"
    )
    [(message, at_end)] = logs.items()  # the one not chained
    assert at_end and at_end[1] is not cause and message.endswith(str(at_end[1]))
    assert message.startswith(
        "Step 'diverge' failed: " if str(cause) == "attempt 2" else "Step 'diverge_twice' failed: "
    )


def test_raise_on_failure_false_logs_the_steps_traceback(
    workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    @pipeline(raise_on_failure=False)
    def p() -> None:
        diverge(rate=0.2)

    with caplog.at_level(logging.ERROR):
        p.run_in(workspace)
    [logged] = attempt_logs(caplog)
    assert logged.exc_info is not None and isinstance(logged.exc_info[1], TrainingDiverged)


def test_raise_on_failure_false_returns_the_run(workspace: Workspace) -> None:
    @pipeline(raise_on_failure=False)
    def p() -> None:
        diverge(rate=0.1)

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED


def test_a_stopped_run_does_not_raise(workspace: Workspace) -> None:
    @step(enable_cache=False)
    def stop_my_run() -> int:
        client = Client(workspace.config, workspace.store)
        client.stop_run(get_step_context().pipeline_run.id)
        return 1

    @pipeline
    def p() -> None:
        add(stop_my_run())

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.STOPPED


def body_that_raises(raise_on_failure: bool):  # type: ignore[no-untyped-def]
    @pipeline(dynamic=True, raise_on_failure=raise_on_failure)
    def p() -> None:
        values = [add(1).load()]
        max(v for v in values if v > 10)  # ValueError: an empty sequence

    return p


def body_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "wharf.execution.dynamic"]


def test_a_dynamic_body_that_raises_fails_the_run_and_the_call_raises_it(
    workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR), pytest.raises(RunFailedError) as failed:
        body_that_raises(True).run_in(workspace)
    cause = failed.value.__cause__
    assert isinstance(cause, ValueError) and "empty" in str(cause)
    run = failed.value.run
    assert run.status is ExecutionStatus.FAILED
    assert run.status_reason == f"The pipeline function raised: ValueError: {cause}"
    assert step_names(workspace, run.id) == ["add"]
    # The traceback is shown once: with the raised error, not also in the log.
    [logged] = body_logs(caplog)
    assert logged.exc_info is None
    assert logged.getMessage() == (
        f"The body of dynamic pipeline 'p' raised: ValueError: {cause} "
        "(its traceback follows with the RunFailedError)"
    )


def test_a_dynamic_body_that_raises_is_logged_once_when_the_run_is_returned(
    workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        run = body_that_raises(False).run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    [logged] = body_logs(caplog)
    assert logged.exc_info is not None and isinstance(logged.exc_info[1], ValueError)


def test_a_failed_step_in_a_dynamic_body_chains_the_steps_exception(
    workspace: Workspace,
) -> None:
    @pipeline(dynamic=True)
    def p() -> None:
        diverge(rate=2.0)

    with pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    assert isinstance(failed.value.__cause__, TrainingDiverged)
    assert list(failed.value.step_reasons) == ["diverge"]


def test_mapped_steps_are_named_by_index(workspace: Workspace) -> None:
    @pipeline(dynamic=True)
    def p() -> None:
        first = add.map([1, 2, 3], b=unmapped(10))
        add(5)
        add(6)  # add_2 is taken by the map: the next free name
        add.map(first, b=unmapped(1))
        steps_lib.produce.map(value=[1, 2])

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    mapped = ["add_0", "add_1", "add_2", "add_2_0", "add_2_1", "add_2_2"]
    called = ["add", "add_3"]
    assert sorted(step_names(workspace, run.id)) == sorted(
        [*mapped, *called, "produce_0", "produce_1"]
    )
