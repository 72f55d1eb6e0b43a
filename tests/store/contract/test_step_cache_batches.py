"""``steps.find_cached_or_create_many``, the engine's batch of cache decisions, on every backend.

Each answer is what ``find_cached_or_create`` of that step would answer; every lookup comes
before any creation of the batch; a miss that may not be created answers None; a refused step
refuses the whole batch (nothing of it is stored).
"""

from __future__ import annotations

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import InputError, RunStoppingError
from wharf.store.models import (
    ArtifactVersionCreate,
    RunUpdate,
    StepRunCreate,
    StepRunFilter,
    StepRunUpdate,
)


def completed(world: World, key: str, *, with_output: bool = True) -> object:
    """A completed step run with cache key ``key`` (and an output version ``model``)."""
    first = world.step(cache_key=key, source_code="def f(): ...", docstring="Original.")
    outputs = {}
    if with_output:
        outputs = {
            "model": ArtifactVersionCreate(
                project_id=world.project.id,
                name=f"model-{key}",
                uri=f"/artifacts/{key}",
                data_type="builtins.int",
                materializer="m",
                producer_step_run_id=first.id,
            )
        }
    done, _ = world.store.steps.finish(first.id, StepRunUpdate(status=S.COMPLETED), outputs)
    return done


def creates(run_id: object, keys: list[str]) -> list[StepRunCreate]:
    return [
        StepRunCreate(run_id=run_id, name=f"s{i}", status=S.RUNNING, cache_key=key)
        for i, key in enumerate(keys)
    ]


def test_answers_are_those_of_the_single_call_in_order(world: World, clock: FakeClock) -> None:
    hit_a = completed(world, "a")
    hit_b = completed(world, "b", with_output=False)
    run = world.run(status=S.RUNNING)
    steps = creates(run.id, ["a", "new-1", "b", "new-2", "a"])
    answers = world.store.steps.find_cached_or_create_many(
        steps, world.project.id, clock.now, record_hit=True
    )
    assert [a is not None and a.created for a in answers] == [False, True, False, True, False]
    assert all(a is not None for a in answers)
    first, miss, second, other_miss, again = answers  # type: ignore[misc]
    assert first.step == hit_a and again.step == hit_a and second.step == hit_b
    assert set(first.outputs) == {"model"} and second.outputs == {}
    assert first.outputs["model"].id == hit_a.outputs["model"]  # type: ignore[attr-defined]
    for answer, step in zip((first, second, again), (steps[0], steps[2], steps[4]), strict=True):
        recorded = answer.recorded
        assert recorded is not None and recorded.status is S.CACHED
        assert recorded.name == step.name and recorded.run_id == run.id
        assert recorded.original_step_run_id == answer.step.id
        assert recorded.outputs == answer.step.outputs
        # The original's code and docstring, as the step brought none.
        assert (recorded.source_code, recorded.docstring) == ("def f(): ...", "Original.")
        assert world.store.steps.get(recorded.id) == recorded
    for answer in (miss, other_miss):
        assert answer.recorded is None and answer.step.status is S.RUNNING
        assert world.store.steps.get(answer.step.id) == answer.step
    assert world.store.steps.list(StepRunFilter(run_id=run.id)).total == 5


def test_hits_record_nothing_unless_asked(world: World, clock: FakeClock) -> None:
    done = completed(world, "a")
    run = world.run(status=S.RUNNING)
    answers = world.store.steps.find_cached_or_create_many(
        creates(run.id, ["a", "a"]), world.project.id, clock.now
    )
    assert [(a.step, a.created, a.recorded) for a in answers if a is not None] == [
        (done, False, None),
        (done, False, None),
    ]
    assert world.store.steps.list(StepRunFilter(run_id=run.id)).total == 0


def test_a_miss_that_may_not_be_created_answers_none(world: World, clock: FakeClock) -> None:
    done = completed(world, "a")
    run = world.run(status=S.RUNNING)
    answers = world.store.steps.find_cached_or_create_many(
        creates(run.id, ["a", "new", "other"]),
        world.project.id,
        clock.now,
        record_hit=True,
        create=[False, False, True],
    )
    hit, skipped, created = answers
    assert hit is not None and hit.step == done and hit.recorded is not None
    assert skipped is None
    assert created is not None and created.created
    names = {s.name for s in world.store.steps.list(StepRunFilter(run_id=run.id)).items}
    assert names == {"s0", "s2"}


def test_every_lookup_comes_before_any_creation(world: World, clock: FakeClock) -> None:
    run = world.run(status=S.RUNNING)
    answers = world.store.steps.find_cached_or_create_many(
        creates(run.id, ["same", "same"]), world.project.id, clock.now, record_hit=True
    )
    assert [a is not None and a.created for a in answers] == [True, True]


def test_expired_and_unfinished_runs_are_no_hits(world: World, clock: FakeClock) -> None:
    expired = world.step(cache_key="old", cache_expires_at=clock.now)
    world.store.steps.update(expired.id, StepRunUpdate(status=S.COMPLETED))
    world.step(cache_key="running")
    newest = completed(world, "twice")
    completed(world, "twice")
    newest = completed(world, "twice")
    run = world.run(status=S.RUNNING)
    answers = world.store.steps.find_cached_or_create_many(
        creates(run.id, ["old", "running", "twice"]), world.project.id, clock.now
    )
    old, running, twice = answers
    assert old is not None and old.created and running is not None and running.created
    assert twice is not None and not twice.created and twice.step == newest


def test_an_empty_batch_answers_nothing(world: World, clock: FakeClock) -> None:
    assert world.store.steps.find_cached_or_create_many([], world.project.id, clock.now) == []


def test_bad_batches_are_refused(world: World, clock: FakeClock) -> None:
    run = world.run(status=S.RUNNING)
    steps = creates(run.id, ["a", "b"])
    with pytest.raises(InputError):
        world.store.steps.find_cached_or_create_many(
            steps, world.project.id, clock.now, create=[True]
        )
    with pytest.raises(InputError):
        world.store.steps.find_cached_or_create_many(
            [steps[0].model_copy(update={"cache_key": None})], world.project.id, clock.now
        )
    assert world.store.steps.list(StepRunFilter(run_id=run.id)).total == 0


@pytest.mark.parametrize("status", [S.STOPPING, S.STOPPED])
def test_a_stopping_run_refuses_the_whole_batch(world: World, clock: FakeClock, status: S) -> None:
    done = completed(world, "cached")
    run = world.run(status=S.RUNNING)
    world.store.runs.update(run.id, RunUpdate(status=S.STOPPING))
    if status is S.STOPPED:
        world.store.runs.update(run.id, RunUpdate(status=S.STOPPED))
    steps = world.store.steps
    with pytest.raises(RunStoppingError):  # a miss among hits
        steps.find_cached_or_create_many(
            creates(run.id, ["cached", "new"]), world.project.id, clock.now
        )
    with pytest.raises(RunStoppingError):  # hits that record themselves
        steps.find_cached_or_create_many(
            creates(run.id, ["cached", "cached"]), world.project.id, clock.now, record_hit=True
        )
    assert steps.list(StepRunFilter(run_id=run.id)).total == 0
    # Writing nothing (hits not recorded, misses not created), nothing refuses it.
    answers = steps.find_cached_or_create_many(
        creates(run.id, ["cached", "new"]), world.project.id, clock.now, create=[True, False]
    )
    assert answers[0] is not None and answers[0].step == done and answers[1] is None
