"""Resuming a run another process started: the DAG runner never launches the steps given as
done, launches those in flight first (also when a failure halted the schedule or the
parallelism is used up), and ``latest_step_runs`` reads each step's latest attempt. A dynamic
pipeline's replayed step call is the earlier one (``replay_differs``) only with the same spec
(step, code, parameters, settings, where its inputs come from) and the same input versions,
also once the spec went through the store."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from tests.execution.test_dag_runner import CHAIN, DIAMOND, Launcher, runner, spec, version
from tests.store.conftest import make_world
from wharf.config.spec import InputSpec, StepConfig, StepSpec
from wharf.core.enums import ExecutionMode
from wharf.core.enums import ExecutionStatus as S
from wharf.execution.launcher import StepOutcome
from wharf.execution.run_lifecycle import latest_step_runs, replay_differs
from wharf.store.sql.store import SqlStore


def completed(name: str) -> StepOutcome:
    return StepOutcome(name, S.COMPLETED, outputs={"output": version(name)})


def test_done_steps_are_not_launched_and_their_outputs_feed_the_next() -> None:
    launch = Launcher()
    done = {"a": completed("a"), "b": completed("b")}
    outcome = runner(spec(CHAIN), launch, done=done).run()
    assert launch.order == ["c", "d"]
    assert launch.inputs["c"] == {"in_b": done["b"].outputs["output"]}
    assert outcome.final_status() == (S.COMPLETED, None)
    assert set(outcome.steps) == {"a", "b", "c", "d"} and outcome.not_started == []


def test_steps_in_flight_are_taken_over_first_even_beyond_the_parallelism() -> None:
    both = threading.Barrier(2, timeout=10)  # b and c must be taken over at the same time
    order: list[str] = []

    def launch(step: StepSpec, inputs: Any, region: Any) -> StepOutcome:
        order.append(step.name)
        if step.name in ("b", "c"):
            both.wait()
        return completed(step.name)

    pipeline = spec(DIAMOND, max_parallelism=1)
    done = {"a": completed("a")}
    outcome = runner(pipeline, launch, done=done, in_flight=["b", "c"]).run()
    assert sorted(order[:2]) == ["b", "c"] and order[2:] == ["d"]
    assert outcome.final_status() == (S.COMPLETED, None)


def test_a_failed_done_step_halts_new_steps_but_those_in_flight_are_taken_over() -> None:
    launch = Launcher()
    edges = {"a": (), "b": ("a",), "c": ("a",), "d": ("c",), "e": ("a",)}
    done = {"a": completed("a"), "b": StepOutcome("b", S.FAILED, reason="boom")}
    pipeline = spec(edges, execution_mode=ExecutionMode.STOP_ON_FAILURE)
    outcome = runner(pipeline, launch, done=done, in_flight=["c"]).run()
    assert launch.order == ["c"]  # taken over; d and e never start
    assert outcome.final_status() == (S.FAILED, "Step(s) failed: b (boom).")  # no step run
    assert sorted(outcome.not_started) == ["d", "e"]


def test_latest_step_runs_keeps_each_steps_highest_attempt(sqlite_store: SqlStore) -> None:
    world = make_world(sqlite_store)
    run = world.run(status=S.RUNNING)
    world.step(run.id, name="a")
    world.step(run.id, name="b", attempt=1)
    second = world.step(run.id, name="b", status=S.RUNNING, attempt=2)
    world.step(world.run(status=S.RUNNING).id, name="c")  # another run's
    latest = latest_step_runs(sqlite_store, run.id)
    assert sorted(latest) == ["a", "b"]
    assert latest["b"].id == second.id
    assert latest_step_runs(sqlite_store, uuid.uuid4()) == {}


def called(**changes: Any) -> StepSpec:
    """The spec of a dynamic call ``square_2`` of step ``square`` (with ``changes``)."""
    values: dict[str, Any] = {
        "name": "square_2",
        "source": "steps:square",
        "source_code": "def square(x, power): ...",
        "code_hash": "h1",
        "upstream": ("count_of",),
        "inputs": {"x": InputSpec(step="count_of", output="output")},
        "parameters": {"power": 2, "label": [1, 2.5]},
        "config": StepConfig(enable_cache=False, environment={"A": "1"}),
    }
    return StepSpec.model_validate(values | changes)


def test_a_replayed_call_is_the_earlier_one_only_with_the_same_spec_and_inputs(
    sqlite_store: SqlStore,
) -> None:
    world = make_world(sqlite_store)
    run = world.run(status=S.RUNNING)
    x = world.version("x")
    record = world.step(run.id, name="square_2", spec=called(), inputs={"x": x.id})
    record = sqlite_store.steps.get(record.id)  # as a restarted process reads it
    assert replay_differs(record, called(), {"x": x.id}) is None
    other_input = {"x": world.version("x").id}
    assert replay_differs(record, called(), other_input) == "other input artifact versions"
    assert replay_differs(record, called(), {}) == "other input artifact versions"
    assert replay_differs(record, called(source="steps:cube"), {"x": x.id}) == (
        "another step function"
    )
    assert replay_differs(record, called(code_hash="h2"), {"x": x.id}) == "other step code"
    changed = called(parameters={"power": 3, "label": [1, 2.5]})
    assert replay_differs(record, changed, {"x": x.id}) == "other parameters"
    elsewhere = called(inputs={"x": InputSpec(step="count_of_2", output="output")})
    assert replay_differs(record, elsewhere, {"x": x.id}) == "inputs from other steps"
    settings = called(config=StepConfig(enable_cache=False, environment={"A": "2"}))
    assert replay_differs(record, settings, {"x": x.id}) == "other step settings"
    no_spec = world.step(run.id, name="square_3", inputs={"x": x.id})
    assert replay_differs(no_spec, called(name="square_3"), {"x": x.id}) == (
        "its earlier step run records no spec to compare with"
    )
