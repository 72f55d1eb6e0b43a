"""A dynamic run's call order (``wharf.execution.call_order``): each step run records the
function's calls up to its own, and a resumed run whose replayed function makes another call at
a recorded position fails there, before that call starts a step; steps the earlier process
started out of call order do not make a same replay fail."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from wharf import pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.execution.run_heartbeat import orchestrator_process
from wharf.execution.run_lifecycle import Resumption, latest_step_runs
from wharf.execution.run_loop import RunJob, run_pipeline
from wharf.execution.runtime import RuntimePolicy
from wharf.sdk.workspace import Workspace
from wharf.store.models import (
    PageRequest,
    PipelineRunRecord,
    RunStart,
    StepRunCreate,
    StepRunFilter,
    StepRunRecord,
)

ORCHESTRATOR_RUN = "local-resumed"


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace.open(load_config({}, home=tmp_path / "home"))
    yield ws
    ws.close()


def steps_of(workspace: Workspace, run_id: Any) -> dict[str, StepRunRecord]:
    page = workspace.store.steps.list(StepRunFilter(run_id=run_id), PageRequest(size=100))
    return {s.name: s for s in page.items}


@step(enable_cache=False)
def square(x: int) -> int:
    return x * x


@step(enable_cache=False)
def cube(x: int) -> int:
    return x * x * x


def three_squares() -> None:
    """square (call 1), then square_2 and square_3 submitted (calls 2 and 3)."""
    square(1)
    for future in [square.submit(2), square.submit(3)]:
        future.result()


def test_each_step_run_records_the_calls_up_to_its_own(workspace: Workspace) -> None:
    @pipeline(dynamic=True)
    def p() -> None:
        three_squares()
        square(4, id="last")

    run = p.run_in(workspace)
    found = steps_of(workspace, run.id)
    order = {0: "square", 1: "square_2", 2: "square_3", 3: "last"}
    recorded: dict[int, str] = {}
    for record in sorted(found.values(), key=lambda r: r.created):  # as they were written
        assert record.calls is not None
        own = [p for p, n in record.calls.items() if n == record.name]
        assert own == [p for p, n in order.items() if n == record.name]
        recorded.update(record.calls)
        assert set(recorded) >= set(range(own[0] + 1))  # every call up to its own
    assert recorded == order


GATE = threading.Event()


@step(enable_cache=False)
def held() -> int:
    GATE.wait(timeout=60)  # holds the run's one thread until the body opens it
    return 0


def test_a_step_started_before_earlier_calls_records_them(workspace: Workspace) -> None:
    GATE.clear()

    @pipeline(dynamic=True, max_parallelism=1)
    def p() -> None:
        first = held.submit()  # takes the one thread
        waiting = square.submit(2)  # waits for it
        square(4, id="last")  # runs now, in the function's thread
        GATE.set()
        first.result()
        waiting.result()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    found = steps_of(workspace, run.id)
    last = found["last"].calls or {}
    assert (last[1], last[2]) == ("square", "last")  # square waited: its call rides along
    assert found["square"].calls == {1: "square"}  # written on last already


def resume(
    workspace: Workspace,
    body: Callable[[], None],
    earlier: dict[str, dict[int, str]],
) -> PipelineRunRecord:
    """Run ``three_squares`` once (its step runs give the specs and outputs), then record a
    run whose orchestrating process died after it started the steps of ``earlier`` (name ->
    the calls it recorded with that step's run), and resume it with ``body`` as the function,
    as a restarted orchestrator does."""

    @pipeline(dynamic=True, name="replayed")
    def first() -> None:
        three_squares()

    done = steps_of(workspace, first.run_in(workspace).id)

    @pipeline(dynamic=True, name="replayed")
    def again() -> None:
        body()

    spec = again.compile()
    stack = workspace.active_stack()
    artifact_store = workspace.component_instance(stack, ComponentType.ARTIFACT_STORE)
    services = workspace.run_services(artifact_store)
    start = RunStart(
        name="replayed-resumed",
        status=ExecutionStatus.RUNNING,
        orchestrator_run_id=ORCHESTRATOR_RUN,
        user_id=workspace.user.id,
        orchestrator=orchestrator_process(services.heartbeat_interval),
    )
    _, snapshot, run = workspace.store.runs.record(
        workspace.project.id, "replayed", stack.id, spec, start
    )
    for name, calls in earlier.items():
        record = done[name]
        create = StepRunCreate(
            run_id=run.id,
            name=name,
            status=ExecutionStatus.RUNNING,
            code_hash=record.code_hash,
            parameters=record.parameters,
            inputs=record.inputs,
            spec=record.spec,
            calls=calls,
        )
        workspace.store.steps.create(create.reusing(record))  # it finished: cached here
    job = RunJob(
        snapshot, run, services, pipeline_function=again.func, spec_factory=again._dynamic_spec
    )
    resumed = Resumption(latest_step_runs(workspace.store, run.id))
    return run_pipeline(job, RuntimePolicy(), None, ORCHESTRATOR_RUN, resumed)


# square_3 started before square_2, which waited for a thread when the process died.
OUT_OF_ORDER = {"square": {0: "square"}, "square_3": {1: "square_2", 2: "square_3"}}


def test_a_same_replay_resumes_steps_the_earlier_process_started_out_of_order(
    workspace: Workspace,
) -> None:
    run = resume(workspace, three_squares, OUT_OF_ORDER)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    found = steps_of(workspace, run.id)
    assert found["square_3"].status is ExecutionStatus.CACHED  # gone on from, not run again
    assert found["square_2"].status is ExecutionStatus.COMPLETED  # never started before


def cube_second() -> None:
    square(1)
    cube(2)  # the earlier process called square_2 here


def cube_third() -> None:
    square(1)
    square.submit(2).result()
    cube.submit(9).result()  # the earlier process called square_3 here


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (cube_second, "called step 'cube' differently (its call 2 was step 'square_2' before)"),
        (cube_third, "called step 'cube' differently (its call 3 was step 'square_3' before)"),
    ],
    ids=["never-started-call", "started-call"],
)
def test_a_replay_that_calls_another_step_at_a_recorded_position_fails_before_starting_it(
    workspace: Workspace, body: Callable[[], None], reason: str
) -> None:
    run = resume(workspace, body, OUT_OF_ORDER)
    assert run.status is ExecutionStatus.FAILED
    assert reason in (run.status_reason or "")
    assert "cube" not in steps_of(workspace, run.id)
