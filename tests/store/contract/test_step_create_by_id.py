"""Creating a step run under an id chosen beforehand is idempotent, on every backend.

The engine retries a step run's creation through a store outage; a retry whose first answer was
lost must find what the first try wrote, never a second step run: ``create``,
``find_cached_or_create`` and ``find_cached_or_create_many`` asked again with the id of a step
run they wrote answer it (as created, or as the hit it was recorded as).
"""

from __future__ import annotations

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World
from tests.store.contract.test_step_cache_batches import completed
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import EntityExistsError, RunStoppingError
from wharf.core.ids import new_id
from wharf.store.models import RunUpdate, StepRunCreate, StepRunFilter


def named(run_id: object, name: str, key: str | None = None) -> StepRunCreate:
    return StepRunCreate(id=new_id(), run_id=run_id, name=name, status=S.RUNNING, cache_key=key)


def count(world: World, run_id: object) -> int:
    return world.store.steps.list(StepRunFilter(run_id=run_id)).total  # type: ignore[arg-type]


def test_create_again_answers_the_step_run_written(world: World) -> None:
    run = world.run(status=S.RUNNING)
    step = named(run.id, "train")
    first = world.store.steps.create(step)
    assert first.id == step.id
    again = world.store.steps.create(step)
    assert again == world.store.steps.get(step.id)
    assert (again.id, again.name, again.status) == (step.id, "train", S.RUNNING)
    assert count(world, run.id) == 1


def test_another_step_under_a_stored_id_is_refused(world: World) -> None:
    run = world.run(status=S.RUNNING)
    step = named(run.id, "train")
    world.store.steps.create(step)
    with pytest.raises(EntityExistsError):
        world.store.steps.create(step.model_copy(update={"name": "other"}))
    with pytest.raises(EntityExistsError):  # same step, fresh id: a second step run, refused
        world.store.steps.create(step.model_copy(update={"id": new_id()}))
    assert count(world, run.id) == 1


def test_a_run_stopped_meanwhile_still_answers_what_was_written(
    world: World, clock: FakeClock
) -> None:
    run = world.run(status=S.RUNNING)
    step, decided = named(run.id, "train"), named(run.id, "eval", "key")
    first = world.store.steps.create(step)
    found = world.store.steps.find_cached_or_create(decided, world.project.id, clock.now)
    world.store.runs.update(run.id, RunUpdate(status=S.STOPPING))
    assert world.store.steps.create(step) == world.store.steps.get(first.id)
    again = world.store.steps.find_cached_or_create(decided, world.project.id, clock.now)
    assert again.created and again.step.id == found.step.id
    with pytest.raises(RunStoppingError):  # a step it had not written: refused
        world.store.steps.create(named(run.id, "other"))


def test_find_cached_or_create_again_answers_the_miss_written(
    world: World, clock: FakeClock
) -> None:
    run = world.run(status=S.RUNNING)
    step = named(run.id, "train", "miss")
    first = world.store.steps.find_cached_or_create(step, world.project.id, clock.now)
    again = world.store.steps.find_cached_or_create(step, world.project.id, clock.now)
    assert first.created and again.created
    assert again.step.id == first.step.id == step.id
    assert count(world, run.id) == 1


def test_find_cached_or_create_again_answers_the_hit_recorded(
    world: World, clock: FakeClock
) -> None:
    cached = completed(world, "key")
    run = world.run(status=S.RUNNING)
    step = named(run.id, "train", "key")
    first = world.store.steps.find_cached_or_create(
        step, world.project.id, clock.now, record_hit=True
    )
    assert first.recorded is not None and first.recorded.id == step.id
    again = world.store.steps.find_cached_or_create(
        step, world.project.id, clock.now, record_hit=True
    )
    assert not again.created and again.step == cached
    assert again.recorded == world.store.steps.get(step.id)
    assert again.recorded is not None and again.recorded.status is S.CACHED
    assert set(again.outputs) == {"model"}
    assert count(world, run.id) == 1


def test_a_batch_again_answers_what_it_wrote_and_decides_the_rest(
    world: World, clock: FakeClock
) -> None:
    cached = completed(world, "hit")
    run = world.run(status=S.RUNNING)
    steps = [named(run.id, "a", "hit"), named(run.id, "b", "miss"), named(run.id, "c", "later")]
    many = world.store.steps.find_cached_or_create_many
    first = many(steps, world.project.id, clock.now, record_hit=True, create=[True, True, False])
    assert first[2] is None
    completed(world, "later")  # cached meanwhile: the repeat records it
    again = many(steps, world.project.id, clock.now, record_hit=True, create=[True, True, False])
    hit, miss, later = again
    assert hit is not None and not hit.created and hit.step == cached
    assert hit.recorded is not None and hit.recorded.id == steps[0].id
    assert set(hit.outputs) == {"model"}
    assert miss is not None and miss.created and miss.step.id == steps[1].id
    assert later is not None and not later.created and later.recorded is not None
    assert later.recorded.id == steps[2].id
    assert count(world, run.id) == 3
