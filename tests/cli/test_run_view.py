"""``wharf.cli.run_view``: the run tree from records alone (retries, failures, steps known only
by their data, a step still running, shared children, units)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from wharf.cli.run_view import (
    RunView,
    amount,
    duration,
    in_pipeline_order,
    latest_attempts,
    render,
    tree_rows,
    unreached_steps,
)
from wharf.config.settings import ResourceSettings
from wharf.config.spec import PipelineSpec, StepConfig, StepSpec
from wharf.core.enums import ExecutionStatus as S
from wharf.store.models import PipelineRunRecord, StepRunRecord

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
RUN_ID = uuid.uuid4()


def run(**values: Any) -> PipelineRunRecord:
    fields: dict[str, Any] = {
        "id": RUN_ID,
        "project_id": uuid.uuid4(),
        "pipeline_id": uuid.uuid4(),
        "snapshot_id": uuid.uuid4(),
        "user_id": None,
        "name": "nightly-1",
        "status": S.COMPLETED,
        "status_reason": None,
        "orchestrator_run_id": None,
        "start_time": T0,
        "end_time": T0 + timedelta(seconds=75),
        "created": T0,
        "updated": T0,
    }
    fields.update(values)
    return PipelineRunRecord.model_validate(fields)


def step(name: str, seconds: float = 1.0, **values: Any) -> StepRunRecord:
    fields: dict[str, Any] = {
        "id": uuid.uuid4(),
        "project_id": uuid.uuid4(),
        "run_id": RUN_ID,
        "name": name,
        "status": S.COMPLETED,
        "status_reason": None,
        "attempt": 1,
        "cache_key": None,
        "cache_expires_at": None,
        "original_step_run_id": None,
        "code_hash": None,
        "source_code": None,
        "docstring": None,
        "parameters": {},
        "inputs": {},
        "outputs": {},
        "start_time": T0,
        "end_time": T0 + timedelta(seconds=seconds),
        "last_heartbeat": None,
        "created": T0,
        "updated": T0,
    }
    fields.update(values)
    return StepRunRecord.model_validate(fields)


def spec(**upstream: tuple[str, ...]) -> PipelineSpec:
    steps = {
        name: StepSpec(name=name, source=f"m:{name}", code_hash="h", upstream=up)
        for name, up in upstream.items()
    }
    return PipelineSpec(name="p", steps=steps)


def labels(view: RunView) -> list[list[str]]:
    return [row[:2] for row in tree_rows(view, T0 + timedelta(hours=1))]


def test_steps_are_listed_in_the_pipelines_order_then_the_data_only_ones_as_they_started() -> None:
    pipeline = spec(load=(), left=("load",), right=("load",))
    started = [step("right"), step("mapped_1"), step("load"), step("left", attempt=1)]
    started += [step("mapped_0"), step("left", attempt=2)]
    ordered = in_pipeline_order(started, pipeline)
    assert [(s.name, s.attempt) for s in ordered] == [
        ("load", 1),
        ("left", 1),
        ("left", 2),
        ("right", 1),
        ("mapped_1", 1),
        ("mapped_0", 1),
    ]
    assert in_pipeline_order(started, None) == started


def test_retries_are_shown_once_with_the_last_attempt_and_its_reason() -> None:
    first = step("train", status=S.FAILED, status_reason="boom")
    second = step("train", attempt=2, status=S.FAILED, status_reason="Traceback\nline 2")
    view = RunView(run(), "p", [step("load"), first, second], spec(load=(), train=("load",)))
    assert latest_attempts(view.steps)[1] == second
    rows = tree_rows(view, T0)
    assert [r[0] for r in rows] == ["load", "└─ train"]
    assert rows[1][1:] == ["failed", "1.0 s", "attempt 2; Traceback"]


def test_steps_known_only_by_their_data_hang_under_their_producers() -> None:
    version = uuid.uuid4()
    producer = step("split", outputs={"out": version})
    mapped = [step(f"train_{i}", inputs={"x": version}) for i in range(2)]
    view = RunView(run(), "p", [producer, *mapped], spec(split=()))
    assert labels(view) == [
        ["split", "completed"],
        ["├─ train_0", "completed"],
        ["└─ train_1", "completed"],
    ]


def test_a_step_with_two_parents_is_listed_once_and_referenced_under_the_other() -> None:
    view = RunView(
        run(),
        "p",
        [step("a"), step("b"), step("c"), step("d")],
        spec(a=(), b=("a",), c=("a",), d=("b", "c")),
    )
    rows = tree_rows(view, T0)
    assert [r[0] for r in rows] == ["a", "├─ b", "│  └─ d", "└─ c", "   └─ ↳ d"]
    assert rows[-1][3] == "listed under b"


def test_a_running_step_and_run_count_up_to_now() -> None:
    running = step("train", status=S.RUNNING, end_time=None)
    view = RunView(run(status=S.RUNNING, end_time=None), "p", [running], spec(train=()))
    lines = render(view, T0 + timedelta(seconds=150))
    assert "Duration  2 min 30 s so far" in lines
    assert tree_rows(view, T0 + timedelta(seconds=3))[0][:3] == ["train", "running", "3.0 s so far"]


def test_a_cycle_in_the_data_still_lists_every_step_once() -> None:
    one, two = uuid.uuid4(), uuid.uuid4()
    a = step("a", inputs={"x": two}, outputs={"o": one})
    b = step("b", inputs={"x": one}, outputs={"o": two})
    rows = tree_rows(RunView(run(), "p", [a, b]), T0)
    assert sorted(r[0].split()[-1] for r in rows if "↳" not in r[0]) == ["a", "b"]


def test_resources_cache_origin_and_header() -> None:
    settings = ResourceSettings(cpu_count=2, memory="1GiB", gpu_count=1, gpu_class="h100")
    compiled = StepSpec(
        name="train", source="m:t", code_hash="h", config=StepConfig(resources=settings)
    )
    cached = step("load", status=S.CACHED, original_step_run_id=uuid.uuid4(), start_time=None)
    trained = step("train", spec=compiled, resource_request_id=uuid.uuid4(), seconds=4000)
    view = RunView(
        run(status_reason="all good"),
        "training",
        [cached, trained],
        spec(load=()),
        cached_from={cached.id: "nightly-0"},
        allocated={trained.id: "1 gpu (h100) in pool gpus"},
    )
    lines = render(view, T0)
    assert lines[:6] == [
        f"Run       nightly-1  ({RUN_ID})",
        "Pipeline  training",
        "Status    completed",
        "Started   2026-01-01 12:00:00",
        "Duration  1 min 15 s",
        "Reason    all good",
    ]
    rows = {r[0]: r for r in tree_rows(view, T0)}
    assert rows["load"][1:] == ["cached", "-", "cached from run nightly-0"]
    assert rows["train"][2] == "1 h 06 min"
    assert rows["train"][3].startswith("asked 1 GPU (h100), 2 CPU, 1 GiB memory; ")
    assert rows["train"][3].endswith("; got 1 gpu (h100) in pool gpus")


def test_units_and_durations() -> None:
    assert amount(1, "license", "license", "default") == "1 license"
    assert amount(2, "GiB", "memory", None) == "2 GiB memory"
    assert amount(250, "mCPU", "CPU", None) == "250 mCPU"  # it read "250 mCPU CPU"
    assert duration(None, None, T0) == "-"
    assert duration(T0, T0 + timedelta(milliseconds=850), T0) == "850 ms"
    assert duration(T0, T0 + timedelta(seconds=59.94), T0) == "59.9 s"


def test_a_run_its_orchestrator_has_not_started_says_how_to_follow_it() -> None:
    waiting = render(
        RunView(run(status=S.INITIALIZING, start_time=None, end_time=None), "p", []), T0
    )
    assert waiting[-3:] == [
        "Steps (0)",
        "(none yet)",
        "Its orchestrator has not started it yet: `wharf runs logs nightly-1 --follow` follows "
        "it and says why if it never will.",
    ]
    assert render(RunView(run(), "p", []), T0)[-1] == "(none yet)"


def test_steps_not_started_are_pending_under_their_upstream_steps_while_the_run_goes_on() -> None:
    running = step("train", status=S.RUNNING, end_time=None)
    pipeline = spec(load=(), train=("load",), score=("train",), report=("load", "score"))
    view = RunView(run(status=S.RUNNING, end_time=None), "p", [step("load"), running], pipeline)
    assert unreached_steps(view) == ["score", "report"]
    assert tree_rows(view, T0 + timedelta(seconds=5)) == [
        ["load", "completed", "1.0 s", "-"],
        ["├─ train", "running", "5.0 s so far", "-"],
        ["│  └─ score", "pending", "-", "waits for train"],
        ["│     └─ ↳ report", "", "", "listed under load"],
        ["└─ report", "pending", "-", "waits for score"],
    ]
    assert "Steps (4)" in render(view, T0)


def test_steps_a_finished_run_never_started_say_so_and_dynamic_pipelines_list_none() -> None:
    failed = step("train", status=S.FAILED, status_reason="boom")
    pipeline = spec(load=(), train=("load",), score=("train",))
    view = RunView(run(status=S.FAILED), "p", [step("load"), failed], pipeline)
    assert tree_rows(view, T0)[-1] == [
        "   └─ score",
        "not run",
        "-",
        "run failed before it started",
    ]
    dynamic = PipelineSpec(name="p", dynamic=True, steps=pipeline.steps)
    assert unreached_steps(RunView(run(status=S.FAILED), "p", [step("load")], dynamic)) == []


def test_a_placeholder_run_lists_its_pipelines_steps_and_how_to_follow_it() -> None:
    placeholder = run(status=S.INITIALIZING, start_time=None, end_time=None)
    lines = render(RunView(placeholder, "p", [], spec(load=(), train=("load",))), T0)
    assert lines[-5:] == [
        "Steps (2)",
        "STEP      STATUS   DURATION  DETAILS",
        "load      pending  -         -",
        "└─ train  pending  -         waits for load",
        "Its orchestrator has not started it yet: `wharf runs logs nightly-1 --follow` follows "
        "it and says why if it never will.",
    ]
