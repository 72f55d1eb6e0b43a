"""The batched step-run create and the composed cache decisions are idempotent by id, on every
backend, with the semantics of ``test_step_create_by_id``'s single create.

``create_many`` asked again with the ids of a batch it wrote (a retry whose answer was lost)
answers the step runs as written, also once their run is stopping; a batch only part of which is
stored so is refused whole. The default combined calls of :mod:`wharf.store.composed`, built on
this store's plain calls, pass the chosen id through (a recorded hit keeps it) and answer a
repeated decision with what it wrote, whatever the lookup finds now.
"""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World
from tests.store.contract.test_step_cache_batches import completed
from tests.store.contract.test_step_create_by_id import count, named
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import EntityExistsError, RunStoppingError
from wharf.core.ids import new_id
from wharf.store.composed import ComposedStepRuns
from wharf.store.models import RunUpdate, StepRunCreate, StepRunUpdate


def batch(world: World, run_id: UUID) -> list[StepRunCreate]:
    """Three named step runs, the second with an input."""
    model = world.version()
    a, b, c = (named(run_id, name) for name in ("a", "b", "c"))
    return [a, b.model_copy(update={"inputs": {"data": model.id}}), c]


def test_create_many_again_answers_the_step_runs_written(world: World) -> None:
    run = world.run(status=S.RUNNING)
    steps = batch(world, run.id)
    first = world.store.steps.create_many(steps)
    again = world.store.steps.create_many(steps)
    assert [r.id for r in first] == [s.id for s in steps]
    assert again == [world.store.steps.get(s.id) for s in steps]
    assert again[1].inputs == steps[1].inputs
    assert count(world, run.id) == 3


def test_create_many_again_on_a_stopping_run_answers_what_was_written(world: World) -> None:
    run = world.run(status=S.RUNNING)
    steps = batch(world, run.id)
    world.store.steps.create_many(steps)
    world.store.runs.update(run.id, RunUpdate(status=S.STOPPING))
    again = world.store.steps.create_many(steps)
    assert [r.id for r in again] == [s.id for s in steps]
    with pytest.raises(RunStoppingError):  # a step run it had not written: refused
        world.store.steps.create_many([*steps, named(run.id, "d")])
    assert count(world, run.id) == 3


def test_a_batch_stored_only_in_part_is_refused_whole(world: World) -> None:
    run = world.run(status=S.RUNNING)
    steps = batch(world, run.id)
    world.store.steps.create_many(steps[:2])
    with pytest.raises(EntityExistsError, match="'a', 'b' of the batch are stored"):
        world.store.steps.create_many(steps)
    assert count(world, run.id) == 2


def test_a_batch_naming_other_step_runs_ids_is_refused(world: World) -> None:
    run = world.run(status=S.RUNNING)
    steps = batch(world, run.id)
    world.store.steps.create_many(steps)
    renamed = [s.model_copy(update={"name": f"{s.name}2"}) for s in steps]
    with pytest.raises(EntityExistsError):  # the ids of other steps' step runs
        world.store.steps.create_many(renamed)
    with pytest.raises(EntityExistsError):  # the same steps under fresh ids: second step runs
        world.store.steps.create_many([s.model_copy(update={"id": new_id()}) for s in steps])
    twice = named(run.id, "e")
    with pytest.raises(EntityExistsError):
        world.store.steps.create_many([twice, twice.model_copy(update={"name": "f"})])
    assert count(world, run.id) == 3


class Composed(ComposedStepRuns):
    """The default combined cache decisions on this store's plain step calls."""

    def __init__(self, world: World) -> None:
        inner = world.store.steps
        self.create, self.get, self.find_cached = inner.create, inner.get, inner.find_cached


def test_a_composed_hit_is_recorded_under_the_chosen_id(world: World, clock: FakeClock) -> None:
    cached = completed(world, "key")
    run = world.run(status=S.RUNNING)
    step = named(run.id, "train", "key")
    steps = Composed(world)
    first = steps.find_cached_or_create(step, world.project.id, clock.now, record_hit=True)
    again = steps.find_cached_or_create(step, world.project.id, clock.now, record_hit=True)
    for answer in (first, again):
        assert not answer.created and answer.step == cached
        assert answer.recorded == world.store.steps.get(step.id)
    assert count(world, run.id) == 1


def test_a_composed_decision_again_answers_what_it_wrote_whatever_it_finds_now(
    world: World, clock: FakeClock
) -> None:
    older = completed(world, "hit")
    run = world.run(status=S.RUNNING)
    hit, miss = named(run.id, "a", "hit"), named(run.id, "b", "miss")
    steps = Composed(world)
    many = steps.find_cached_or_create_many
    first = many([hit, miss], world.project.id, clock.now, record_hit=True)
    completed(world, "hit"), completed(world, "miss")  # newer step runs of both keys meanwhile
    again = many([hit, miss], world.project.id, clock.now, record_hit=True)
    assert again == first
    hit_again, miss_again = again
    assert hit_again is not None and hit_again.recorded is not None
    assert (hit_again.created, hit_again.step, hit_again.recorded.id) == (False, older, hit.id)
    assert miss_again is not None and miss_again.created
    assert miss_again.step == world.store.steps.get(miss.id)
    assert miss_again.step.status is S.RUNNING
    one = steps.find_cached_or_create(miss, world.project.id, clock.now, record_hit=True)
    assert one.created and one.step.id == miss.id
    assert count(world, run.id) == 2


def test_a_composed_hit_again_once_its_step_run_expired_answers_the_hit(
    world: World, clock: FakeClock
) -> None:
    expires = clock.now + timedelta(hours=1)
    first = world.step(cache_key="key", cache_expires_at=expires)
    cached = world.store.steps.update(first.id, StepRunUpdate(status=S.COMPLETED))
    run = world.run(status=S.RUNNING)
    step = named(run.id, "train", "key")
    steps = Composed(world)
    steps.find_cached_or_create(step, world.project.id, clock.now, record_hit=True)
    later = expires + timedelta(hours=1)  # the lookup finds nothing now
    assert world.store.steps.find_cached(world.project.id, "key", later) is None
    again = steps.find_cached_or_create(step, world.project.id, later, record_hit=True)
    assert not again.created and again.step == cached
    assert again.recorded == world.store.steps.get(step.id)
    assert count(world, run.id) == 1
