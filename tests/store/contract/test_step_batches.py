"""The SQL store's combined step calls and the stop rule, on every backend.

``find_cached_or_create`` and ``finish`` are one transaction each; no step run is ever created
in a stopping or stopped run, whichever call would create it.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import IllegalOperationError, IllegalTransitionError, RunStoppingError
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionFilter,
    RunUpdate,
    StepRunCreate,
    StepRunFilter,
    StepRunUpdate,
)
from wharf.store.ports import StepRunRepository


def batches(world: World) -> StepRunRepository:
    return world.store.steps


def output(world: World, producer: object, name: str = "model") -> ArtifactVersionCreate:
    return ArtifactVersionCreate(
        project_id=world.project.id,
        name=name,
        uri=f"/artifacts/{name}",
        data_type="builtins.int",
        materializer="m",
        producer_step_run_id=producer,
    )


def completed_with_output(world: World, key: str) -> tuple[object, dict[str, object]]:
    first = world.step(cache_key=key)
    done, versions = batches(world).finish(
        first.id, StepRunUpdate(status=S.COMPLETED), {"model": output(world, first.id)}
    )
    return done, dict(versions)


def test_a_hit_answers_outputs_by_name_and_records_the_reuse(
    world: World, clock: FakeClock
) -> None:
    done, versions = completed_with_output(world, "k")
    run = world.run(status=S.RUNNING)
    create = StepRunCreate(run_id=run.id, name="again", status=S.RUNNING, cache_key="k")
    hit = batches(world).find_cached_or_create(create, world.project.id, clock.now, record_hit=True)
    assert not hit.created and hit.step == done
    assert hit.outputs == versions
    assert hit.recorded is not None and hit.recorded.status is S.CACHED
    assert hit.recorded.original_step_run_id == hit.step.id
    assert world.store.steps.get(hit.recorded.id) == hit.recorded
    miss = batches(world).find_cached_or_create(
        create.model_copy(update={"name": "other", "cache_key": "nothing"}),
        world.project.id,
        clock.now,
    )
    assert miss.created and miss.step == world.store.steps.get(miss.step.id)


@pytest.mark.parametrize("status", [S.STOPPING, S.STOPPED])
def test_no_step_run_is_created_in_a_stopping_or_stopped_run(
    world: World, clock: FakeClock, status: S
) -> None:
    done, _ = completed_with_output(world, "cached")
    run = world.run(status=S.RUNNING)
    world.store.runs.update(run.id, RunUpdate(status=S.STOPPING))
    if status is S.STOPPED:
        world.store.runs.update(run.id, RunUpdate(status=S.STOPPED))
    create = StepRunCreate(run_id=run.id, name="late", status=S.RUNNING, cache_key="cached")
    steps = batches(world)
    with pytest.raises(RunStoppingError, match=f"is {status.value}: step 'late' was not started"):
        world.store.steps.create(create)
    with pytest.raises(RunStoppingError):
        steps.create_many([create, create.model_copy(update={"name": "late-2"})])
    with pytest.raises(RunStoppingError):  # a miss
        steps.find_cached_or_create(
            create.model_copy(update={"cache_key": "new"}), world.project.id, clock.now
        )
    with pytest.raises(RunStoppingError):  # a hit that records itself
        steps.find_cached_or_create(create, world.project.id, clock.now, record_hit=True)
    assert world.store.steps.list(StepRunFilter(run_id=run.id)).total == 0
    # A hit that records nothing creates nothing, so nothing refuses it: the caller's own
    # ``create`` of the reuse is what the stop refuses.
    hit = steps.find_cached_or_create(create, world.project.id, clock.now)
    assert not hit.created and hit.step == done


def test_finish_is_atomic(world: World) -> None:
    step = world.step()
    world.store.steps.update(step.id, StepRunUpdate(status=S.FAILED))
    before = world.store.artifacts.list_versions(ArtifactVersionFilter(name="model")).total
    with pytest.raises(IllegalTransitionError):
        batches(world).finish(
            step.id, StepRunUpdate(status=S.COMPLETED), {"model": output(world, step.id)}
        )
    # The refused update took its versions with it.
    assert world.store.artifacts.list_versions(ArtifactVersionFilter(name="model")).total == before


def test_a_finish_repeated_after_its_answer_was_lost_answers_what_it_recorded(
    world: World,
) -> None:
    """The engine repeats a finish whose answer was lost (a workspace server replica killed
    after its commit, a dropped connection): the repeat creates no version and answers the
    step run and output versions the first one recorded, so the step's result is neither lost
    nor refused as a relink (which made the engine take a completed step for an internal
    error)."""
    step = world.step()
    done, versions = batches(world).finish(
        step.id, StepRunUpdate(status=S.COMPLETED), {"model": output(world, step.id)}
    )
    again, repeated = batches(world).finish(
        step.id, StepRunUpdate(status=S.COMPLETED), {"model": output(world, step.id)}
    )
    assert again == done and repeated == versions
    assert world.store.artifacts.list_versions(ArtifactVersionFilter(name="model")).total == 1


def test_a_finish_of_a_step_completed_with_other_outputs_is_still_refused(world: World) -> None:
    step = world.step()
    batches(world).finish(
        step.id, StepRunUpdate(status=S.COMPLETED), {"model": output(world, step.id)}
    )
    with pytest.raises(IllegalOperationError, match="cannot be relinked"):
        batches(world).finish(
            step.id,
            StepRunUpdate(status=S.COMPLETED),
            {"model": output(world, step.id), "other": output(world, step.id, "other")},
        )


def test_finish_numbers_versions_and_links_them(world: World) -> None:
    step = world.step()
    done, versions = batches(world).finish(
        step.id,
        StepRunUpdate(status=S.COMPLETED),
        {"a": output(world, step.id, "x"), "b": output(world, step.id, "x")},
    )
    assert [versions[n].version for n in ("a", "b")] == [1, 2]
    assert done.outputs == {n: v.id for n, v in versions.items()}
    assert world.store.steps.get(step.id) == done
    assert isinstance(done.end_time, datetime)
