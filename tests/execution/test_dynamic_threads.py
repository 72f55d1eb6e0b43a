"""A step called from a thread that a dynamic pipeline's function started itself
(``wharf.execution.dynamic_threads``): refused, naming ``.submit``/``.map``; before, it ran as a
plain function, recorded nowhere, as if no run were going on."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from wharf import pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import StepInterfaceError
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace.open(load_config({}, home=tmp_path / "home"))
    yield ws
    ws.close()


def step_names(workspace: Workspace, run_id: Any) -> set[str]:
    page = workspace.store.steps.list(StepRunFilter(run_id=run_id), PageRequest(size=100))
    return {s.name for s in page.items}


@step(enable_cache=False)
def plus_one(x: int) -> int:
    return x + 1


def in_a_thread(call: Any) -> BaseException | Any:
    """What ``call()`` returned, or raised, in a thread of its own."""
    got: list[Any] = []

    def run() -> None:
        try:
            got.append(call())
        except BaseException as exc:
            got.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return got[0]


@pytest.mark.parametrize(
    "call",
    [lambda: plus_one(1), lambda: plus_one.submit(1), lambda: plus_one.map([1, 2])],
    ids=["called", "submitted", "mapped"],
)
def test_a_step_called_in_a_thread_the_function_started_is_refused(
    workspace: Workspace, call: Any
) -> None:
    got: dict[str, Any] = {}

    @pipeline(dynamic=True)
    def p() -> None:
        got["thread"] = in_a_thread(call)
        got["here"] = plus_one(2).load()  # the function's own thread: a step of the run

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert isinstance(got["thread"], StepInterfaceError), got["thread"]
    message = str(got["thread"])
    assert "dynamic pipeline 'p'" in message
    assert "step.submit(...) or step.map(...)" in message
    assert got["here"] == 3
    assert step_names(workspace, run.id) == {"plus_one"}


def test_a_thread_pool_in_the_function_fails_the_run_saying_what_to_use(
    workspace: Workspace,
) -> None:
    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(plus_one, [1, 2]))

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    assert "step.submit(...) or step.map(...)" in (run.status_reason or ""), run.status_reason
    assert step_names(workspace, run.id) == set()


def test_outside_a_running_pipeline_a_step_in_a_thread_is_a_plain_call() -> None:
    assert in_a_thread(lambda: plus_one(1)) == 2
