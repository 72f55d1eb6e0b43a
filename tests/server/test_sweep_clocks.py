"""A caller whose clock runs ahead of the workspace server's cannot end runs or steps that are
alive: the lost-orchestrator and lost-heartbeat sweeps compare deadlines (stamped by the server's
store) with an instant never later than the server's own clock, whoever asks -- an admin (whose
``wharf runs list`` sweeps every project) as well as a member sweeping its own run's steps.
A run or step whose deadline did pass is still ended."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from tests.server.conftest import World
from tests.server.things import Things
from tests.waiting import wait_for
from wharf.core.enums import ExecutionStatus as S
from wharf.execution.run_lifecycle import start_run
from wharf.store.lost_runs import sweep_lost_runs
from wharf.store.models import (
    OrchestratorProcess,
    PipelineRunRecord,
    RunCreate,
    StepRunCreate,
    StepRunRecord,
)
from wharf.store.rest.store import RestStore

ELSEWHERE = OrchestratorProcess(
    host="another-machine", pid=7, start="b:1", liveness_timeout_seconds=60
)
AHEAD = timedelta(hours=1)


@pytest.fixture
def things(world: World) -> Things:
    return Things(world)


@pytest.fixture
def stores(world: World) -> Iterator[dict[str, RestStore]]:
    opened = {role: RestStore(world.url, world.credentials[role]) for role in ("admin", "member")}
    try:
        yield opened
    finally:
        for store in opened.values():
            store.close()


def running_run(world: World, things: Things, member: RestStore) -> PipelineRunRecord:
    """A run of project A that the member started on another machine, beating (60 s)."""
    planned = world.stores.store.runs.create(
        RunCreate(
            project_id=world.a.id,
            pipeline_id=things.pipeline.id,
            snapshot_id=things.snapshot.id,
            name=things.name("alive"),
            user_id=world.users["member"].id,
        )
    )
    return start_run(member, planned, None, ELSEWHERE)


def running_step(world: World, run: PipelineRunRecord) -> StepRunRecord:
    return world.stores.store.steps.create(
        StepRunCreate(run_id=run.id, name="train", status=S.RUNNING)
    )


@pytest.mark.parametrize("role", ["admin", "member"])
def test_a_clock_ahead_ends_no_live_run(
    world: World, things: Things, stores: dict[str, RestStore], role: str
) -> None:
    run = running_run(world, things, stores["member"])
    ahead = datetime.now(UTC) + AHEAD
    assert sweep_lost_runs(stores[role], ahead) == []
    assert world.stores.store.runs.get(run.id).status is S.RUNNING


@pytest.mark.parametrize("role", ["admin", "member"])
def test_a_clock_ahead_fails_no_live_step(
    world: World, things: Things, stores: dict[str, RestStore], role: str
) -> None:
    run = running_run(world, things, stores["member"])
    step = running_step(world, run)
    stores["member"].steps.update_heartbeat(step.id, 60)
    ahead = datetime.now(UTC) + AHEAD
    assert stores[role].steps.fail_lost_heartbeats(ahead, run.id) == []
    assert world.stores.store.steps.get(step.id).status is S.RUNNING


def test_a_step_whose_deadline_passed_is_still_failed(
    world: World, things: Things, stores: dict[str, RestStore]
) -> None:
    run = running_run(world, things, stores["member"])
    step = running_step(world, run)
    stores["member"].steps.update_heartbeat(step.id, 0.01)
    member = stores["member"].steps
    failed = wait_for(lambda: member.fail_lost_heartbeats(datetime.now(UTC) + AHEAD, run.id))
    assert [s.id for s in failed] == [step.id]
    assert world.stores.store.steps.get(step.id).status is S.FAILED
