"""The default ``find_cached_or_create_many`` (``wharf.store.composed``) on the SQL store's plain
calls, recorded: every lookup comes before any creation, a miss that may not be created makes
nothing, and the answers are those of the SQL store's own batch."""

from __future__ import annotations

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World
from tests.store.test_composed import Steps
from wharf.core.enums import ExecutionStatus as S
from wharf.store.models import StepRunCreate, StepRunUpdate

pytestmark = pytest.mark.parametrize("backend_name", ["sqlite"], indirect=True)


def test_lookups_first_then_creations_in_order(world: World, clock: FakeClock) -> None:
    done = world.step(cache_key="hit")
    world.store.steps.update(done.id, StepRunUpdate(status=S.COMPLETED))
    run = world.run(status=S.RUNNING)
    steps = Steps(world)
    creates = [
        StepRunCreate(run_id=run.id, name=name, status=S.RUNNING, cache_key=key)
        for name, key in (("a", "new"), ("b", "hit"), ("c", "other"))
    ]
    answers = steps.find_cached_or_create_many(
        creates, world.project.id, clock.now, record_hit=True, create=[True, True, False]
    )
    assert steps.calls == [
        "find_cached new",
        "find_cached hit",
        "find_cached other",
        "create a",
        "create b",
    ]
    created, hit, skipped = answers
    assert created is not None and created.created and created.step.name == "a"
    assert hit is not None and not hit.created and hit.step.id == done.id
    assert hit.recorded is not None and hit.recorded.status is S.CACHED
    assert skipped is None
