"""Contract: the ``id_prefix`` filter finds exactly the records whose id's hex form starts
with it, on every backend (the range query must order ids as their hex text everywhere)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from string import hexdigits
from typing import Any, Protocol
from uuid import UUID

import pytest
from pydantic import ValidationError

from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus
from wharf.store.models import (
    ArtifactFilter,
    ArtifactVersionFilter,
    PageRequest,
    PipelineFilter,
    RunFilter,
    ScheduleFilter,
    StepRunFilter,
)

ALL = PageRequest(size=1000)
HEX = sorted(set(hexdigits.lower()))


class _Identified(Protocol):
    @property
    def id(self) -> UUID: ...


def _check(records: Sequence[_Identified], found: Callable[[str], set[UUID]]) -> None:
    """Every one-digit prefix (some match several records, some none: the range's edges) and
    every record's own prefixes (4, 8, 31 and 32 digits) find what the hex text says."""
    ids = {r.id for r in records}
    for digit in HEX:
        assert found(digit) == {i for i in ids if i.hex.startswith(digit)}, digit
    for record in records:
        for length in (4, 8, 31, 32):
            prefix = record.id.hex[:length]
            assert found(prefix) == {i for i in ids if i.hex.startswith(prefix)}


def test_runs_and_steps(world: World) -> None:
    runs = [world.run(status=ExecutionStatus.RUNNING) for _ in range(24)]

    def runs_found(prefix: str) -> set[UUID]:
        page = world.store.runs.list(RunFilter(project_id=world.project.id, id_prefix=prefix), ALL)
        assert page.total == len(page.items)
        return {r.id for r in page.items}

    _check(runs, runs_found)
    steps = [world.step(runs[i % 3].id) for i in range(24)]

    def steps_found(prefix: str) -> set[UUID]:
        items = world.store.steps.list(StepRunFilter(id_prefix=prefix), ALL).items
        return {s.id for s in items}

    _check(steps, steps_found)
    # combined with the other filters
    one = steps[0]
    in_run = world.store.steps.list(StepRunFilter(run_id=one.run_id, id_prefix=one.id.hex[:4]))
    assert one.id in {s.id for s in in_run.items}
    assert all(s.run_id == one.run_id for s in in_run.items)


def test_pipelines_artifacts_versions_schedules(world: World) -> None:
    store = world.store
    for i in range(20):
        store.pipelines.get_or_create(world.project.id, f"p{i}")
    pipelines = store.pipelines.list(PipelineFilter(), ALL).items  # and the world's own
    _check(
        pipelines,
        lambda p: {r.id for r in store.pipelines.list(PipelineFilter(id_prefix=p), ALL).items},
    )
    versions = [world.version(f"a{i % 10}") for i in range(20)]
    _check(
        versions,
        lambda p: {
            v.id
            for v in store.artifacts.list_versions(ArtifactVersionFilter(id_prefix=p), ALL).items
        },
    )
    artifacts = store.artifacts.list(ArtifactFilter(), ALL).items
    _check(
        artifacts,
        lambda p: {a.id for a in store.artifacts.list(ArtifactFilter(id_prefix=p), ALL).items},
    )
    schedules = [store.schedules.create(_schedule(world, f"s{i}")) for i in range(16)]
    _check(
        schedules,
        lambda p: {s.id for s in store.schedules.list(ScheduleFilter(id_prefix=p), ALL).items},
    )


def test_prefix_in_another_project_is_not_found(world: World) -> None:
    run = world.run()
    other = world.store.projects.create("elsewhere")
    found = world.store.runs.list(RunFilter(project_id=other.id, id_prefix=run.id.hex[:8]))
    assert found.items == [] and found.total == 0


@pytest.mark.parametrize("bad", ["", "ABCD", "xyz1", "0" * 33, "1234-5678"])
def test_prefix_must_be_lower_case_hex_digits(bad: str) -> None:
    with pytest.raises(ValidationError):
        RunFilter(id_prefix=bad)


def _schedule(world: World, name: str) -> Any:
    from wharf.store.models import ScheduleCreate

    return ScheduleCreate(
        project_id=world.project.id,
        pipeline_id=world.pipeline.id,
        snapshot_id=world.snapshot.id,
        name=name,
        interval_seconds=3600,
    )
