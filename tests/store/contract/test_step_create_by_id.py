"""Creating a step run under an id chosen beforehand is idempotent, on every backend.

The engine retries a step run's creation through a store outage; a retry whose first answer was
lost must find what the first try wrote, never a second step run: ``create``,
``find_cached_or_create`` and ``find_cached_or_create_many`` asked again with the id of a step
run they wrote answer it (as created, or as the hit it was recorded as), whatever the lookup
finds now: a miss written is answered created also once another run cached its key (a hit
answered instead would leave it behind, running or queued for ever). The id stored may differ
from the one chosen (the workspace server scopes it by run, ``wharf.server.chosen_ids``):
callers use the id answered.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World
from tests.store.contract.test_step_cache_batches import completed
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import EntityExistsError, RunStoppingError
from wharf.core.ids import new_id
from wharf.store.models import RunUpdate, StepRunCreate, StepRunFilter, StepRunUpdate


def named(run_id: object, name: str, key: str | None = None) -> StepRunCreate:
    return StepRunCreate(id=new_id(), run_id=run_id, name=name, status=S.RUNNING, cache_key=key)


def count(world: World, run_id: object) -> int:
    return world.store.steps.list(StepRunFilter(run_id=run_id)).total  # type: ignore[arg-type]


def test_create_again_answers_the_step_run_written(world: World) -> None:
    run = world.run(status=S.RUNNING)
    step = named(run.id, "train")
    first = world.store.steps.create(step)
    again = world.store.steps.create(step)
    assert again == world.store.steps.get(first.id)
    assert (again.id, again.name, again.status) == (first.id, "train", S.RUNNING)
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
    assert again.step.id == first.step.id
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
    assert first.recorded is not None
    again = world.store.steps.find_cached_or_create(
        step, world.project.id, clock.now, record_hit=True
    )
    assert not again.created and again.step == cached
    assert again.recorded == world.store.steps.get(first.recorded.id)
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
    assert first[0] is not None and first[0].recorded is not None
    assert hit.recorded is not None and hit.recorded.id == first[0].recorded.id
    assert set(hit.outputs) == {"model"}
    assert first[1] is not None
    assert miss is not None and miss.created and miss.step.id == first[1].step.id
    assert later is not None and not later.created and later.recorded is not None
    assert count(world, run.id) == 3


@pytest.mark.parametrize("record_hit", [False, True])
def test_a_decision_again_once_its_key_was_cached_answers_the_miss_written(
    world: World, clock: FakeClock, record_hit: bool
) -> None:
    """The first try wrote a miss and its answer was lost; another run completed the key
    meanwhile: the retry answers the step run written, not the hit (which would orphan it)."""
    run = world.run(status=S.RUNNING)
    step = named(run.id, "train", "key")
    decide = world.store.steps.find_cached_or_create
    first = decide(step, world.project.id, clock.now, record_hit=record_hit)
    completed(world, "key")
    again = decide(step, world.project.id, clock.now, record_hit=record_hit)
    assert first.created and again.created and again.recorded is None
    assert again.step == world.store.steps.get(first.step.id)
    assert again.step.status is S.RUNNING
    assert count(world, run.id) == 1


@pytest.mark.parametrize("record_hit", [False, True])
def test_a_batch_again_once_its_keys_were_cached_answers_the_misses_written(
    world: World, clock: FakeClock, record_hit: bool
) -> None:
    run = world.run(status=S.RUNNING)
    steps = [named(run.id, "a", "x"), named(run.id, "b", "y")]
    many = world.store.steps.find_cached_or_create_many
    first = many(steps, world.project.id, clock.now, record_hit=record_hit, create=[True, False])
    assert first[0] is not None and first[0].created and first[1] is None
    completed(world, "x")
    cached_y = completed(world, "y")
    again = many(steps, world.project.id, clock.now, record_hit=record_hit, create=[True, False])
    written, decided = again
    assert written is not None and written.created and written.recorded is None
    assert written.step == world.store.steps.get(first[0].step.id)
    assert decided is not None and not decided.created and decided.step == cached_y
    assert (decided.recorded is not None) is record_hit
    assert count(world, run.id) == (2 if record_hit else 1)


def test_a_batch_again_once_the_hit_it_recorded_expired_answers_the_hit(
    world: World, clock: FakeClock
) -> None:
    """A step that may not be created (``create`` False) whose hit was recorded: its retry,
    once the hit expired, answers the recorded hit rather than None."""
    expires = clock.now + timedelta(hours=1)
    first = world.step(cache_key="key", cache_expires_at=expires)
    cached = world.store.steps.update(first.id, StepRunUpdate(status=S.COMPLETED))
    run = world.run(status=S.RUNNING)
    step = named(run.id, "train", "key")
    many = world.store.steps.find_cached_or_create_many
    [first_hit] = many([step], world.project.id, clock.now, record_hit=True, create=[False])
    assert first_hit is not None and first_hit.recorded is not None
    later = expires + timedelta(hours=1)  # the lookup finds nothing now
    [again] = many([step], world.project.id, later, record_hit=True, create=[False])
    assert again is not None and not again.created and again.step == cached
    assert again.recorded == world.store.steps.get(first_hit.recorded.id)
    assert count(world, run.id) == 1


def test_a_batch_again_on_a_stopping_run_answers_what_it_wrote(
    world: World, clock: FakeClock
) -> None:
    completed(world, "hit")
    run = world.run(status=S.RUNNING)
    steps = [named(run.id, "a", "hit"), named(run.id, "b", "miss")]
    many = world.store.steps.find_cached_or_create_many
    first = many(steps, world.project.id, clock.now, record_hit=True)
    world.store.runs.update(run.id, RunUpdate(status=S.STOPPING))
    assert many(steps, world.project.id, clock.now, record_hit=True) == first
    with pytest.raises(RunStoppingError):  # a step it had not written: refused
        many([*steps, named(run.id, "c", "new")], world.project.id, clock.now, record_hit=True)
    assert count(world, run.id) == 2
