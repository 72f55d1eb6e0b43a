"""Dynamic pipelines: steps decided at run time, futures, map, edges, caching, runtimes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.e2e import steps_lib
from tests.e2e.test_isolated import make_stack
from wharf import RunFailedError, pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import InputError, StepExecutionError, StepInterfaceError
from wharf.execution.dynamic_futures import OutputArtifact, StepFuture, unmapped
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter

ASC = PageRequest(sort="asc", size=1000)


def steps(workspace: Workspace, run_id) -> dict:
    return {s.name: s for s in workspace.store.steps.list(StepRunFilter(run_id=run_id), ASC).items}


@step(enable_cache=False)
def add(a: int, b: int = 0) -> int:
    return a + b


@step(enable_cache=False)
def total(values: list[int]) -> int:
    return sum(values)


def test_calls_return_lazy_outputs_and_edges_follow_data(workspace: Workspace):
    seen = {}

    @pipeline(dynamic=True)
    def p(n: int = 3) -> None:
        x = add(1, 2)
        assert isinstance(x, OutputArtifact)
        seen["x"] = x.load()
        y = add(x, b=n)  # an artifact input: y depends on x
        if y.load() > 5:
            add(y, b=100, id="big")
        else:
            add(y, b=-100, id="small")

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    found = steps(workspace, run.id)
    assert set(found) == {"add", "add_2", "big"}
    assert seen["x"] == 3
    assert found["add_2"].inputs["a"] == found["add"].outputs["output"]
    assert found["add_2"].spec.upstream == ("add",)
    assert found["big"].spec.upstream == ("add_2",)
    assert found["add"].spec.upstream == ()


def test_submit_and_map(workspace: Workspace):
    results = {}

    @pipeline(dynamic=True)
    def p() -> None:
        futures = [add.submit(i, b=1) for i in range(5)]
        assert all(isinstance(f, StepFuture) for f in futures)
        results["submitted"] = [f.load() for f in futures]
        mapped = add.map([1, 2, 3], b=unmapped(10))
        mapped.wait()
        results["mapped"] = mapped.load()
        again = add.map(mapped, b=unmapped(1))  # map over the outputs of a map
        results["again"] = again.load()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert results == {
        "submitted": [1, 2, 3, 4, 5],
        "mapped": [11, 12, 13],
        "again": [12, 13, 14],
    }
    assert len(steps(workspace, run.id)) == 11


def test_map_errors(workspace: Workspace):
    errors = []

    @pipeline(dynamic=True)
    def p() -> None:
        for call in (lambda: add.map(1, b=2), lambda: add.map([1, 2], b=[1])):
            try:
                call()
            except StepInterfaceError as exc:
                errors.append(str(exc))

    p.run_in(workspace)
    assert "at least one list" in errors[0]
    assert "different lengths" in errors[1]


def test_a_list_of_step_outputs_passed_to_one_input_is_refused_with_what_to_do(
    workspace: Workspace,
):
    errors = []

    @pipeline(dynamic=True)
    def p() -> None:
        outputs = [add(1), add(2)]
        mapped = add.map([1, 2])
        for value in (outputs, mapped, (add(3), 4)):
            try:
                total(value)
            except StepInterfaceError as exc:
                errors.append(str(exc))
        total([o.load() for o in outputs])  # their values are a parameter

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert [e.split(" got ")[1].split(" of ")[0] for e in errors] == [
        "a list",
        "a MapResultsFuture",
        "a tuple",
    ]
    assert all("Input 'values' of step 'total" in e and ".load()" in e for e in errors), errors


@step(enable_cache=False)
def word():  # no annotation: what it returns is known once it ran
    return "ten"


def test_values_that_do_not_fit_an_annotation_are_refused_at_the_call(workspace: Workspace):
    errors: list[str] = []

    @pipeline(dynamic=True)
    def p() -> None:
        three = add(1, 2).load()
        add(three, b=1)  # a value known at call time, that fits
        for call in (
            lambda: add("one"),
            lambda: add.submit(1, b=2.5),
            lambda: add.map([1, "two", 3]),  # refused before any of the map's steps starts
            lambda: add.map([1, 2], b=unmapped("x")),
            lambda: add(word()),  # an upstream artifact, stored as a str
        ):
            try:
                call()
            except StepInterfaceError as exc:
                errors.append(str(exc))
        add("uncaught")  # the run fails

    with pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    assert errors == [
        "Step 'add_3' parameter 'a' is annotated int but was given str.",
        "Step 'add_4' parameter 'b' is annotated int but was given float.",
        "Step 'add_2_1' parameter 'a' is annotated int but was given str.",
        "Step 'add_0' parameter 'b' is annotated int but was given str.",
        "Step 'add_5' parameter 'a' is annotated int but was given str "
        "(output 'output' of step 'word').",
    ]
    run = failed.value.run
    assert run.status_reason == (
        "The pipeline function raised: "
        "Step 'add_6' parameter 'a' is annotated int but was given str."
    )
    assert sorted(steps(workspace, run.id)) == ["add", "add_2", "word"]


def test_a_duplicate_explicit_id_is_an_error_at_the_call(workspace: Workspace):
    errors: list[Exception] = []

    @pipeline(dynamic=True)
    def p() -> None:
        add(1, id="same").load()
        for call in (lambda: add(2, id="same"), lambda: add.submit(3, id="same")):
            try:
                call()
            except InputError as exc:
                errors.append(exc)
        add.map([1, 2])  # add_0, add_1
        try:
            add(4, id="add_1")  # an id a map gave out
        except InputError as exc:
            errors.append(exc)
        add(5, id="same")  # uncaught: the run fails

    with pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    run = failed.value.run
    assert run.status is ExecutionStatus.FAILED
    assert len(errors) == 3
    assert all("'same'" in str(e) for e in errors[:2])
    assert "'add_1'" in str(errors[2]) and "already used" in str(errors[2])
    assert "'same'" in (run.status_reason or "")
    found = steps(workspace, run.id)
    assert sorted(found) == ["add_0", "add_1", "same"]
    assert found["same"].outputs  # the first step under the id is the one kept


def test_submit_outside_a_dynamic_pipeline():
    with pytest.raises(StepInterfaceError, match="only possible within a dynamic pipeline"):
        add.submit(1)
    with pytest.raises(StepInterfaceError, match="only possible within a dynamic pipeline"):
        add.map([1])


def test_failed_step_raises_in_the_pipeline_and_fails_the_run(workspace: Workspace):
    caught = []

    @pipeline(dynamic=True)
    def p() -> None:
        try:
            steps_lib.merge(label="x", fail=True)
        except StepExecutionError as exc:
            caught.append(str(exc))
        steps_lib.merge(label="after", fail=True)

    with pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    run = failed.value.run
    assert run.status is ExecutionStatus.FAILED
    assert "boom in x" in caught[0]
    assert "merge_2" in (run.status_reason or "")


def test_dynamic_steps_are_cached(workspace: Workspace):
    @pipeline(dynamic=True)
    def p() -> None:
        steps_lib.double(steps_lib.produce(value=4))

    p.run_in(workspace)
    run = p.run_in(workspace)
    found = steps(workspace, run.id)
    assert {s.status for s in found.values()} == {ExecutionStatus.CACHED}


def test_worker_pool_bounds_concurrency(workspace: Workspace):
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    @step(enable_cache=False)
    def busy(i: int) -> int:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.02)
        with lock:
            state["now"] -= 1
        return i

    @pipeline(dynamic=True, max_parallelism=2)
    def p() -> None:
        busy.map(list(range(8))).wait()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED
    assert state["max"] == 2


def test_isolated_runtime_in_a_dynamic_pipeline(wharf_home: Path, monkeypatch):
    import os

    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    ws = Workspace.open(load_config())
    make_stack(ws, "procs", "local_process")
    pids = {}

    @pipeline(dynamic=True)
    def p() -> None:
        pids["inline"] = steps_lib.whoami(label="inline").load()
        pids["isolated"] = steps_lib.whoami.with_options(runtime="isolated")(
            label="isolated"
        ).load()
        steps_lib.isolated_double(steps_lib.produce(value=5))

    try:
        run = p.run_in(ws)
        found = steps(ws, run.id)
    finally:
        ws.close()
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert pids["inline"] == os.getpid() and pids["isolated"] != os.getpid()
    assert found["isolated_double"].pid is not None
