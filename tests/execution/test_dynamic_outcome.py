"""How a dynamic run tells a step's failure its pipeline function let through
(``wharf.execution.dynamic_outcome``): which step failed and that the function did not catch it,
the same for a called step and a submitted one waited for; a caught failure leaves the reason to
the failed steps. Real runs of real pipelines."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from wharf import RunFailedError, pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import StepExecutionError
from wharf.execution.dynamic_outcome import StepFailedError
from wharf.sdk.workspace import Workspace

UNCAUGHT = "Step 'boom' failed (the pipeline function did not catch it): ValueError: bad input 1"


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace.open(load_config({}, home=tmp_path / "home"))
    yield ws
    ws.close()


@step(enable_cache=False)
def boom(x: int) -> int:
    raise ValueError(f"bad input {x}")


@step(enable_cache=False)
def fine(x: int) -> int:
    return x


WAYS: dict[str, Callable[[], object]] = {
    "called": lambda: boom(1),
    "submitted-result": lambda: boom.submit(1).result(),
    "submitted-load": lambda: boom.submit(1).load(),
}


@pytest.mark.parametrize("way", list(WAYS))
def test_an_uncaught_step_failure_names_the_step_and_says_it_was_not_caught(
    workspace: Workspace, way: str
) -> None:
    """It said only the step's own failure (``Step 'boom' failed: ValueError: …``), as if the
    function had nothing to do with it."""

    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        fine(0)
        WAYS[way]()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    assert run.status_reason == UNCAUGHT


def test_the_error_raised_to_the_caller_says_the_same(workspace: Workspace) -> None:
    @pipeline(dynamic=True)
    def p() -> None:
        boom(1)

    with pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    assert failed.value.run.status_reason == UNCAUGHT
    assert str(failed.value).startswith(
        f"Pipeline run '{failed.value.run.name}' failed: {UNCAUGHT}"
    )


def test_a_caught_failure_is_the_steps_as_the_function_saw_it(workspace: Workspace) -> None:
    """The function catches the step's own failure (unchanged, a ``StepExecutionError``); the
    run's reason is then the failed step, as for a failure no call raised."""
    caught: list[BaseException] = []

    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        for call in WAYS.values():
            try:
                call()
            except StepExecutionError as exc:
                caught.append(exc)

    run = p.run_in(workspace)
    assert run.status_reason == "Step(s) failed: boom, boom_2, boom_3.", run.status_reason
    assert [str(e) for e in caught] == [
        f"Step '{name}' failed: ValueError: bad input 1" for name in ("boom", "boom_2", "boom_3")
    ]


def test_the_error_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(StepFailedError("boom", "ValueError: bad")))
    assert (error.step, error.reason, str(error)) == (
        "boom",
        "ValueError: bad",
        "Step 'boom' failed: ValueError: bad",
    )
