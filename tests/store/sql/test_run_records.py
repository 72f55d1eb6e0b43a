"""``run_records``: the snapshot's spec is written as pydantic's JSON text, which must be the very
text the spec column's own type writes (``json.dumps`` of ``model_dump(mode="json")``), so that
snapshots recorded either way are read back alike."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone

import pytest

from tests.store.conftest import World
from wharf.config.settings import ResourceSettings, RetryConfig, Schedule
from wharf.config.spec import InputSpec, PipelineConfig, PipelineSpec, StepConfig, StepSpec
from wharf.store.models import RunStart
from wharf.store.sql import tables as t


def varied_spec() -> PipelineSpec:
    odd = {
        "nan": float("nan"),
        "inf": float("-inf"),
        "big": 2**70,
        "tiny": 5e-324,
        "huge": 1e300,
        "text": 'é "quoted" \\ \u2028 \x00 😀',
        "nested": {"1": [1.5, -0.0, True, None, {"k": []}]},
    }
    config = StepConfig(
        enable_cache=False,
        retry=RetryConfig(max_retries=2, delay=0.5, backoff=2.0),
        resources=ResourceSettings(cpu_count=1.5, memory="1GB"),
        environment={"A": "b"},
    )
    steps = {
        "load": StepSpec(name="load", source="pkg:load", code_hash="h", parameters=odd),
        "train": StepSpec(
            name="train",
            source="pkg:train",
            source_code="def train(x):\n    return x  # ünïcode\n",
            code_hash="h2",
            upstream=("load",),
            inputs={"x": InputSpec(step="load", output="output")},
            config=config,
        ),
    }
    schedule = Schedule(
        cron_expression="0 * * * *",
        start_time=datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2))),
        end_time=datetime(2027, 1, 1, tzinfo=UTC),
    )
    return PipelineSpec(
        name="p",
        source="pkg:p",
        parameters=odd,
        config=PipelineConfig(schedule=schedule, max_parallelism=3),
        steps=steps,
    )


def column_text(spec: PipelineSpec) -> str:
    value = spec.model_dump(mode="json")
    processor = t.pipeline_snapshot.c.spec.type.process_bind_param  # type: ignore[attr-defined]
    return str(processor(value, None))


def test_pydantic_json_is_the_column_text() -> None:
    spec = varied_spec()
    assert spec.model_dump_json() == column_text(spec)
    assert column_text(spec) == json.dumps(
        spec.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False
    )


@pytest.mark.parametrize("backend_name", ["sqlite", "postgresql", "mariadb"], indirect=True)
def test_a_recorded_spec_reads_back_equal(world: World) -> None:
    runs = world.store.runs
    spec = varied_spec()
    _, snapshot, _ = runs.record(world.project.id, "p", None, spec, RunStart(name="r"))
    # As a spec written through the column's type reads back: every value as it was given
    # (NaN and the infinities too: ``core.exact_values``), so equal but for NaN != NaN.
    expected = PipelineSpec.model_validate(json.loads(column_text(spec)))
    read = world.store.snapshots.get(snapshot.id).spec
    assert read.model_dump_json() == expected.model_dump_json() == spec.model_dump_json()
    assert expected.steps["train"] == spec.steps["train"]
    odd = read.steps["load"].parameters
    assert math.isnan(odd.pop("nan")) and odd["inf"] == -math.inf and odd["big"] == 2**70
    assert read.parameters["huge"] == 1e300
