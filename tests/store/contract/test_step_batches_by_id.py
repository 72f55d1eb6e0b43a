"""The batched step-run create is idempotent by id, on every backend, with the semantics of
``test_step_create_by_id``'s single create.

``create_many`` asked again with the ids of a batch it wrote (a retry whose answer was lost)
answers the step runs as written, also once their run is stopping; a batch only part of which is
stored so is refused whole.
"""

from __future__ import annotations

from uuid import UUID

import pytest

from tests.store.conftest import World
from tests.store.contract.test_step_create_by_id import count, named
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import EntityExistsError, RunStoppingError
from wharf.core.ids import new_id
from wharf.store.models import RunUpdate, StepRunCreate


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
    assert again == [world.store.steps.get(r.id) for r in first]
    assert again[1].inputs == steps[1].inputs
    assert count(world, run.id) == 3


def test_create_many_again_on_a_stopping_run_answers_what_was_written(world: World) -> None:
    run = world.run(status=S.RUNNING)
    steps = batch(world, run.id)
    first = world.store.steps.create_many(steps)
    world.store.runs.update(run.id, RunUpdate(status=S.STOPPING))
    again = world.store.steps.create_many(steps)
    assert [r.id for r in again] == [r.id for r in first]
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
