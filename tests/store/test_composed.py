"""The composed run calls (``wharf.store.composed``), built here on the SQL store's plain calls,
which are recorded: the order and number of plain calls each combined call makes, and that its
effect is the SQL store's own combined call's."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.transitions import STOPPED_ON_REQUEST
from wharf.store.composed import ComposedRuns
from wharf.store.models import (
    PipelineRunRecord,
    RunCreate,
    RunUpdate,
)

pytestmark = pytest.mark.parametrize("backend_name", ["sqlite"], indirect=True)


class Runs(ComposedRuns):
    """The SQL store's plain run calls, recorded, with the default combined calls; ``before``
    runs before each update (a concurrent writer)."""

    def __init__(self, world: World) -> None:
        self._inner = world.store.runs
        self.calls: list[str] = []
        self.before: list[Any] = []

    def create(self, run: RunCreate) -> PipelineRunRecord:
        self.calls.append("create")
        return self._inner.create(run)

    def get(self, run_id: UUID) -> PipelineRunRecord:
        self.calls.append("get")
        return self._inner.get(run_id)

    def update(self, run_id: UUID, update: RunUpdate) -> PipelineRunRecord:
        self.calls.append(f"update {update.status.value if update.status else None}")
        if self.before:
            self.before.pop(0)()
        return self._inner.update(run_id, update)


@pytest.mark.parametrize(
    ("current", "wanted", "ends"),
    [
        (S.RUNNING, S.COMPLETED, S.COMPLETED),
        (S.STOPPING, S.COMPLETED, S.STOPPED),
        (S.STOPPING, S.FAILED, S.FAILED),
        (S.FAILED, S.COMPLETED, S.FAILED),  # finished: returned unchanged, nothing written
    ],
)
def test_finish_decides_from_the_status_it_reads(
    world: World, current: S, wanted: S, ends: S
) -> None:
    runs = Runs(world)
    run = world.run(status=S.RUNNING)
    if current is not S.RUNNING:
        world.store.runs.update(run.id, RunUpdate(status=current))
    ended = runs.finish(run.id, wanted, None)
    assert ended.status is ends and world.store.runs.get(run.id) == ended
    assert runs.calls == (["get"] if current.is_finished else ["get", f"update {ends.value}"])
    if current is S.STOPPING and wanted is S.COMPLETED:
        assert ended.status_reason == STOPPED_ON_REQUEST


def test_finish_decides_again_when_a_stop_came_in_between(world: World) -> None:
    runs = Runs(world)
    run = world.run(status=S.RUNNING)
    runs.before.append(lambda: world.store.runs.update(run.id, RunUpdate(status=S.STOPPING)))
    runs.before.append(lambda: None)
    ended = runs.finish(run.id, S.COMPLETED, None)
    assert ended.status is S.STOPPED
    assert runs.calls == ["get", "update completed", "get", "update stopped"]


def test_a_composed_store_issues_no_run_tokens(world: World) -> None:
    assert Runs(world).issue_token(world.run().id) is None
