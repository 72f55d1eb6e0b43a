"""Contract: step runs, their artifact links, transitions, and the cache lookup."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import (
    EntityExistsError,
    EntityNotFoundError,
    IllegalOperationError,
    IllegalTransitionError,
    InputError,
)
from wharf.store.models import (
    PageRequest,
    StepRunCreate,
    StepRunFilter,
    StepRunRecord,
    StepRunUpdate,
)


def test_create_with_links_and_get(world: World, clock: FakeClock) -> None:
    run = world.run(status=S.RUNNING)
    data = world.version("data")
    model = world.version("model")
    source = "def train(data):\n    '''ünïcode'''\n" * 4000  # > 64 KiB on MySQL
    step = world.store.steps.create(
        StepRunCreate(
            run_id=run.id,
            name="train",
            status=S.RUNNING,
            cache_key="k",
            code_hash="abc",
            source_code=source,
            docstring="Train it.",
            parameters={"lr": 0.5, "layers": [1, 2], "name": None},
            inputs={"data": data.id},
            outputs={"model": model.id},
        )
    )
    assert step.project_id == world.project.id and step.attempt == 1
    assert step.inputs == {"data": data.id} and step.outputs == {"model": model.id}
    assert step.start_time == step.created == clock.now and step.end_time is None
    assert step.last_heartbeat is None
    loaded = world.store.steps.get(step.id)
    assert loaded == step and loaded.source_code == source


def test_create_errors(world: World) -> None:
    run = world.run(status=S.RUNNING)
    world.step(run.id, name="train")
    with pytest.raises(EntityExistsError, match="already has a step run 'train'"):
        world.step(run.id, name="train")
    assert world.step(run.id, name="train", attempt=2).attempt == 2
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No pipeline run with id {missing}"):
        world.step(missing)
    with pytest.raises(EntityNotFoundError, match=f"No artifact version with id {missing}"):
        world.step(run.id, inputs={"x": missing})
    with pytest.raises(EntityNotFoundError, match=f"No artifact version with id {missing}"):
        world.step(run.id, outputs={"x": missing})
    with pytest.raises(EntityNotFoundError, match=f"No step run with id {missing}"):
        world.step(run.id, original_step_run_id=missing)
    with pytest.raises(IllegalTransitionError):
        world.step(run.id, status=S.COMPLETED)
    with pytest.raises(InputError, match="cannot be stored"):
        world.step(run.id, parameters={"x": object()})
    with pytest.raises(EntityNotFoundError) as info:
        world.store.steps.get(missing)
    assert str(info.value) == f"No step run with id {missing}."
    assert world.store.steps.list(StepRunFilter(run_id=run.id)).total == 2  # nothing partial


def test_deleted_run_is_not_found_even_when_cached(world: World) -> None:
    run = world.run(status=S.RUNNING)
    world.step(run.id)  # the repository now knows the run's project
    world.store.runs.delete(run.id)
    with pytest.raises(EntityNotFoundError, match=f"No pipeline run with id {run.id}"):
        world.step(run.id)


def test_created_finished_gets_end_time(world: World) -> None:
    original = world.step()
    cached = world.step(status=S.CACHED, original_step_run_id=original.id)
    assert cached.end_time == cached.created and cached.start_time is None
    assert cached.original_step_run_id == original.id


def test_update_status_times_and_outputs(world: World, clock: FakeClock) -> None:
    steps = world.store.steps
    step = world.step(status=S.QUEUED)
    assert step.start_time is None
    running = steps.update(step.id, StepRunUpdate(status=S.RUNNING))
    assert running.start_time == clock.now
    first = world.version("a")
    second = world.version("b")
    with_one = steps.update(step.id, StepRunUpdate(outputs={"a": first.id}))
    assert with_one.outputs == {"a": first.id}
    expires = clock.now + timedelta(hours=1)
    done = steps.update(
        step.id,
        StepRunUpdate(
            status=S.COMPLETED,
            status_reason="fine",
            outputs={"a": first.id, "b": second.id},  # re-adding a link is a no-op
            cache_key="key",
            cache_expires_at=expires,
        ),
    )
    assert done.outputs == {"a": first.id, "b": second.id}
    assert done.end_time == clock.now and done.start_time == running.start_time
    assert (done.cache_key, done.cache_expires_at, done.status_reason) == ("key", expires, "fine")
    assert steps.get(step.id) == done


def test_update_refuses_relinking_and_illegal_transitions(world: World) -> None:
    steps = world.store.steps
    first, second = world.version("a"), world.version("a")
    step = world.step(outputs={"a": first.id})
    with pytest.raises(IllegalOperationError, match="already has output 'a'"):
        steps.update(step.id, StepRunUpdate(status=S.FAILED, outputs={"a": second.id}))
    assert steps.get(step.id) == step
    done = steps.update(step.id, StepRunUpdate(status=S.COMPLETED))
    with pytest.raises(IllegalTransitionError, match="completed -> running"):
        steps.update(step.id, StepRunUpdate(status=S.RUNNING, status_reason="again"))
    assert steps.get(step.id) == done
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No step run with id {missing}"):
        steps.update(missing, StepRunUpdate(status=S.RUNNING))
    with pytest.raises(EntityNotFoundError, match=f"No artifact version with id {missing}"):
        steps.update(step.id, StepRunUpdate(outputs={"c": missing}))
    assert steps.get(step.id) == done


def test_list_filters_and_links(world: World) -> None:
    run = world.run(status=S.RUNNING)
    version = world.version()
    a = world.step(run.id, name="a", outputs={"out": version.id})
    b = world.step(run.id, name="b", inputs={"in": version.id}, cache_key="k")
    c = world.step(run.id, name="c", status=S.QUEUED)
    other = world.step(name="a")
    steps = world.store.steps
    assert steps.list().total == 4
    by_run = steps.list(StepRunFilter(run_id=run.id), PageRequest(sort="asc"))
    assert by_run.items == [a, b, c]
    assert by_run.items[0].outputs == {"out": version.id}
    assert by_run.items[1].inputs == {"in": version.id}
    names = steps.list(StepRunFilter(run_id=run.id, names=("a", "c")))
    assert [s.name for s in names.items] == ["c", "a"]
    assert steps.list(StepRunFilter(names=())).total == 0
    assert [s.id for s in steps.list(StepRunFilter(names=("a",))).items] == [other.id, a.id]
    assert steps.list(StepRunFilter(status=S.QUEUED)).items == [c]
    assert steps.list(StepRunFilter(cache_key="k")).items == [b]
    assert steps.list(StepRunFilter(project_id=world.project.id)).total == 4


def test_find_cached(world: World, clock: FakeClock) -> None:
    steps = world.store.steps
    assert steps.find_cached(world.project.id, "k", clock.now) is None

    def completed(key: str, **kw: Any) -> StepRunRecord:
        step = world.step(cache_key=key, **kw)
        return steps.update(step.id, StepRunUpdate(status=S.COMPLETED))

    world.step(cache_key="k")  # running: not a cache hit
    failed = world.step(cache_key="k")
    steps.update(failed.id, StepRunUpdate(status=S.FAILED))
    older = completed("k")
    newer = completed("k", outputs={"o": world.version().id})
    completed("other-key")
    assert steps.find_cached(world.project.id, "k", clock.now) == steps.get(newer.id)

    # Expiry: strictly later than ``now`` is still valid; at or before is expired.
    expiring = completed("e", cache_expires_at=clock.now + timedelta(seconds=10))
    assert steps.find_cached(world.project.id, "e", clock.now) == expiring
    assert expiring.cache_expires_at is not None
    assert steps.find_cached(world.project.id, "e", expiring.cache_expires_at) is None
    assert older.cache_expires_at is None

    # Another project never sees this project's cache.
    elsewhere = world.store.projects.create("elsewhere")
    assert steps.find_cached(elsewhere.id, "k", clock.now) is None
