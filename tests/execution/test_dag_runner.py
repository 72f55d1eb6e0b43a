"""``DagRunner``: upstream order, parallelism, failures and stops, with a fake launcher; and the
thread that ends a step going on with the next one (no hand-over between two steps of a chain).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from wharf.config.spec import InputSpec, PipelineConfig, PipelineSpec, StepSpec
from wharf.core.enums import ExecutionMode
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import RunStoppingError
from wharf.execution.dag_runner import DagRunner
from wharf.execution.interrupt import InterruptibleRegion
from wharf.execution.launcher import StepOutcome
from wharf.store.models import ArtifactVersionRecord


def version(step: str) -> ArtifactVersionRecord:
    return ArtifactVersionRecord(
        id=uuid.uuid4(),
        artifact_id=uuid.uuid4(),
        project_id=uuid.uuid4(),
        name=step,
        version=1,
        uri=f"/a/{step}",
        data_type="builtins.int",
        materializer="m",
        content_hash=None,
        producer_step_run_id=None,
        artifact_store_id=None,
        created=datetime(2026, 1, 1, tzinfo=UTC),
    )


def spec(edges: Mapping[str, tuple[str, ...]], **config: Any) -> PipelineSpec:
    steps = {
        name: StepSpec(
            name=name,
            source=f"x:{name}",
            code_hash=name,
            upstream=up,
            inputs={f"in_{u}": InputSpec(step=u, output="output") for u in up},
        )
        for name, up in edges.items()
    }
    return PipelineSpec(name="p", source="x:p", steps=steps, config=PipelineConfig(**config))


class NoStop:
    def __init__(self, stopping: bool = False) -> None:
        self.reads = 0
        self.stopping = stopping

    def requested(self) -> bool:
        self.reads += 1
        return self.stopping


class Launcher:
    """Records each step's thread, inputs and the most steps seen running at once."""

    def __init__(self, fail: set[str] = frozenset(), delay: float = 0.0) -> None:  # type: ignore[assignment]
        self.fail = fail
        self.delay = delay
        self.threads: dict[str, int] = {}
        self.inputs: dict[str, dict[str, ArtifactVersionRecord]] = {}
        self.order: list[str] = []
        self.running = 0
        self.most = 0
        self.lock = threading.Lock()
        self.outputs: dict[str, ArtifactVersionRecord] = {}

    def __call__(
        self,
        step: StepSpec,
        inputs: Mapping[str, ArtifactVersionRecord],
        region: InterruptibleRegion,
    ) -> StepOutcome:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.threads[step.name] = threading.get_ident()
            self.inputs[step.name] = dict(inputs)
            self.order.append(step.name)
        time.sleep(self.delay)
        with self.lock:
            self.running -= 1
        if step.name in self.fail:
            return StepOutcome(step.name, S.FAILED, reason="boom")
        out = self.outputs[step.name] = version(step.name)
        return StepOutcome(step.name, S.COMPLETED, outputs={"output": out})


def runner(pipeline: PipelineSpec, launch: Any, stop: NoStop | None = None, **kw: Any) -> DagRunner:
    return DagRunner(pipeline, launch, None, uuid.uuid4(), stop or NoStop(), **kw)  # type: ignore[arg-type]


CHAIN = {"a": (), "b": ("a",), "c": ("b",), "d": ("c",)}
DIAMOND = {"a": (), "b": ("a",), "c": ("a",), "d": ("b", "c")}


def test_a_chain_runs_on_one_pool_thread_in_order() -> None:
    launch = Launcher()
    outcome = runner(spec(CHAIN), launch).run()
    assert outcome.final_status() == (S.COMPLETED, None)
    assert launch.order == ["a", "b", "c", "d"]
    assert len(set(launch.threads.values())) == 1
    assert threading.get_ident() not in launch.threads.values()
    assert launch.inputs["c"] == {"in_b": launch.outputs["b"]}


def test_fan_out_runs_in_parallel_up_to_the_limit() -> None:
    wide = {
        "root": (),
        **{f"w{i}": ("root",) for i in range(6)},
        "end": tuple(f"w{i}" for i in range(6)),
    }
    launch = Launcher(delay=0.05)
    outcome = runner(spec(wide, max_parallelism=3), launch).run()
    assert outcome.final_status()[0] is S.COMPLETED
    assert launch.most == 3
    assert launch.order[0] == "root" and launch.order[-1] == "end"
    assert launch.inputs["end"] == {f"in_w{i}": launch.outputs[f"w{i}"] for i in range(6)}


def test_parallelism_one_runs_one_step_at_a_time() -> None:
    launch = Launcher(delay=0.01)
    runner(spec(DIAMOND, max_parallelism=1), launch).run()
    assert launch.most == 1 and launch.order[0] == "a" and launch.order[-1] == "d"


@pytest.mark.parametrize(
    ("mode", "started"),
    [
        (ExecutionMode.STOP_ON_FAILURE, {"a", "b"}),
        (ExecutionMode.CONTINUE_ON_FAILURE, {"a", "b", "x", "y"}),
    ],
)
def test_a_failure_blocks_descendants(mode: ExecutionMode, started: set[str]) -> None:
    edges = {"a": (), "b": ("a",), "c": ("b",), "x": ("a",), "y": ("x",)}
    launch = Launcher(fail={"b"})
    outcome = runner(spec(edges, max_parallelism=1, execution_mode=mode), launch).run()
    assert set(launch.order) == started
    assert outcome.failed == ["b"] and "c" in outcome.not_started
    assert outcome.final_status() == (S.FAILED, "Step(s) failed: b (boom).")  # no step run


def test_a_refused_step_stops_the_run() -> None:
    def launch(step: StepSpec, inputs: Any, region: Any) -> StepOutcome:
        if step.name == "b":
            raise RunStoppingError("stopping")
        return StepOutcome(step.name, S.COMPLETED, outputs={"output": version(step.name)})

    outcome = runner(spec(CHAIN), launch).run()
    assert outcome.stop_requested and set(outcome.steps) == {"a"}
    assert outcome.not_started == ["b", "c", "d"]
    assert outcome.final_status()[0] is S.STOPPED


def test_an_internal_error_fails_the_step() -> None:
    def launch(step: StepSpec, inputs: Any, region: Any) -> StepOutcome:
        raise ValueError("bug")

    outcome = runner(spec(CHAIN), launch).run()
    assert outcome.steps["a"].status is S.FAILED and outcome.not_started == ["b", "c", "d"]
    assert "Internal error: ValueError: bug" in (outcome.steps["a"].reason or "")


def test_a_base_exception_ends_the_run_after_running_steps() -> None:
    finished: list[str] = []

    def launch(step: StepSpec, inputs: Any, region: Any) -> StepOutcome:
        if step.name == "b":
            raise SystemExit(3)
        time.sleep(0.05)
        finished.append(step.name)
        return StepOutcome(step.name, S.COMPLETED, outputs={"output": version(step.name)})

    edges = {"a": (), "b": ("a",), "c": ("a",), "d": ("c",)}
    with pytest.raises(SystemExit):
        runner(spec(edges, max_parallelism=2), launch).run()
    assert "c" in finished and "d" not in finished  # c ran to its end; nothing started after


def test_the_status_is_read_at_the_end_unless_the_caller_ends_the_run() -> None:
    stop = NoStop(stopping=True)
    outcome = runner(spec(CHAIN), Launcher(), stop).run()
    assert stop.reads == 1 and outcome.final_status()[0] is S.STOPPED
    quiet = NoStop(stopping=True)
    outcome = runner(spec(CHAIN), Launcher(), quiet, read_stop_at_end=False).run()
    assert quiet.reads == 0 and outcome.final_status()[0] is S.COMPLETED


def test_a_step_may_run_a_pipeline_itself() -> None:
    inner = Launcher()

    def launch(step: StepSpec, inputs: Any, region: Any) -> StepOutcome:
        if step.name == "b":  # while the outer steps hold their threads
            assert (
                runner(spec(DIAMOND, max_parallelism=2), inner).run().final_status()[0]
                is S.COMPLETED
            )
        return StepOutcome(step.name, S.COMPLETED, outputs={"output": version(step.name)})

    wide = {"a": (), "b": ("a",), "c": ("a",), "d": ("a",)}
    outcome = runner(spec(wide, max_parallelism=3), launch).run()
    assert outcome.final_status()[0] is S.COMPLETED and set(inner.order) == set(DIAMOND)


def test_a_runs_step_threads_end_with_it() -> None:
    launch = Launcher()
    runner(spec(DIAMOND), launch).run()
    idents = set(launch.threads.values())
    deadline = time.monotonic() + 5
    while any(t.ident in idents for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(t.ident not in idents for t in threading.enumerate())
