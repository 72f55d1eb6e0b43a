"""Contract: run metadata (JSON values, later value wins) and schedules."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from tests.conftest import FakeClock
from tests.store.conftest import World, make_world
from wharf.core.enums import MetadataResourceType as M
from wharf.core.errors import EntityExistsError, EntityNotFoundError, InputError
from wharf.store.models import PageRequest, ScheduleCreate, ScheduleFilter


def test_metadata_values_and_overwrite(world: World) -> None:
    md = world.store.run_metadata
    run = world.run()
    added = md.add(M.PIPELINE_RUN, run.id, {"loss": 0.25, "tags": ["a", "b"], "cfg": {"x": None}})
    assert {r.key: r.value for r in added} == {
        "loss": 0.25,
        "tags": ["a", "b"],
        "cfg": {"x": None},
    }
    md.add(M.PIPELINE_RUN, run.id, {"loss": 0.125, "none": None})
    values = {r.key: r.value for r in md.list(M.PIPELINE_RUN, run.id)}
    assert values == {"loss": 0.125, "tags": ["a", "b"], "cfg": {"x": None}, "none": None}
    assert len(md.list(M.PIPELINE_RUN, run.id)) == 4
    assert md.list(M.STEP_RUN, run.id) == []


def test_metadata_on_steps_and_versions(world: World) -> None:
    md = world.store.run_metadata
    step = world.step()
    version = world.version()
    md.add(M.STEP_RUN, step.id, {"k": 1})
    md.add(M.ARTIFACT_VERSION, version.id, {"k": "v"})
    assert [r.value for r in md.list(M.STEP_RUN, step.id)] == [1]
    (record,) = md.list(M.ARTIFACT_VERSION, version.id)
    assert (record.resource_type, record.resource_id, record.value) == (
        M.ARTIFACT_VERSION,
        version.id,
        "v",
    )


def test_metadata_errors(world: World) -> None:
    md = world.store.run_metadata
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No pipeline run with id {missing}"):
        md.add(M.PIPELINE_RUN, missing, {"k": 1})
    run = world.run()
    with pytest.raises(InputError, match="not JSON-serialisable"):
        md.add(M.PIPELINE_RUN, run.id, {"ok": 1, "bad": object()})
    assert md.list(M.PIPELINE_RUN, run.id) == []


def schedule_create(world: World, name: str = "nightly", **kw: Any) -> ScheduleCreate:
    values: dict[str, Any] = {
        "project_id": world.project.id,
        "pipeline_id": world.pipeline.id,
        "snapshot_id": world.snapshot.id,
        "name": name,
        "cron_expression": "0 3 * * *",
    }
    values.update(kw)
    return ScheduleCreate(**values)


def test_schedules(world: World, clock: FakeClock) -> None:
    schedules = world.store.schedules
    start = clock.now + timedelta(days=1)
    nightly = schedules.create(schedule_create(world, start_time=start, catchup=True))
    assert nightly.active and nightly.catchup and nightly.start_time == start
    assert schedules.get(nightly.id) == nightly
    naive = datetime(2030, 1, 1, 0, 0, 0, 123456)  # naive datetimes are UTC
    once = schedules.create(
        schedule_create(world, "once", cron_expression=None, run_once_start_time=naive)
    )
    assert once.run_once_start_time is not None
    assert once.run_once_start_time.replace(tzinfo=None) == naive
    assert schedules.get(once.id) == once
    assert schedules.list().items == [once, nightly]
    assert schedules.list(page=PageRequest(size=1, sort="asc")).items == [nightly]

    paused = schedules.set_active(nightly.id, False)
    assert not paused.active and schedules.get(nightly.id) == paused
    assert schedules.set_active(nightly.id, False) == paused  # idempotent
    assert schedules.set_active(nightly.id, True).active

    schedules.delete(nightly.id)
    with pytest.raises(EntityNotFoundError, match=f"No schedule with id {nightly.id}"):
        schedules.get(nightly.id)
    with pytest.raises(EntityNotFoundError):
        schedules.delete(nightly.id)
    with pytest.raises(EntityNotFoundError):
        schedules.set_active(nightly.id, True)


def test_schedule_errors(world: World) -> None:
    schedules = world.store.schedules
    schedules.create(schedule_create(world))
    with pytest.raises(EntityExistsError, match="schedule named 'nightly'"):
        schedules.create(schedule_create(world))
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No pipeline snapshot with id {missing}"):
        schedules.create(schedule_create(world, "x", snapshot_id=missing))


def test_schedules_are_listed_by_project_pipeline_and_name(world: World) -> None:
    schedules = world.store.schedules
    nightly = schedules.create(schedule_create(world))
    hourly = schedules.create(schedule_create(world, "hourly", cron_expression="0 * * * *"))
    other = make_world(world.store, "elsewhere")
    there = schedules.create(schedule_create(other))  # the same name in another project
    assert schedules.list(ScheduleFilter(project_id=world.project.id)).items == [hourly, nightly]
    assert schedules.list(ScheduleFilter(project_id=other.project.id)).items == [there]
    assert schedules.list(ScheduleFilter(pipeline_id=other.pipeline.id)).items == [there]
    assert schedules.list(ScheduleFilter(name="nightly")).total == 2
    named = ScheduleFilter(project_id=world.project.id, name="nightly")
    assert schedules.list(named).items == [nightly]
    assert schedules.list(ScheduleFilter(name="never")).items == []


@pytest.mark.parametrize("cron", ["not a cron", "61 * * * *", "* * *", ""])
def test_an_invalid_cron_expression_is_refused_before_the_store(world: World, cron: str) -> None:
    with pytest.raises(ValidationError, match="cron"):
        schedule_create(world, cron_expression=cron)
    assert world.store.schedules.list().total == 0
