"""A schedule token fires its schedule's runs -- each with a run token of its own -- and nothing
more, over real HTTP through the client calls an orchestrator pod makes
(``wharf.store.rest.schedule_tokens``, then ``RestStore`` with the run token).

The rest is what a hostile holder of a leaked schedule token tries: another snapshot or schedule
(of its project: 403; of another: 404), a run another schedule fired, any other route, and acting
after its schedule was deleted, its key revoked or its issuer removed from the project."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from tests.faults.refused_metadata import refusing_metadata_key
from tests.server.conftest import World
from tests.server.live import service_key
from tests.server.matrix import Things
from tests.store.conftest import spec
from wharf.core.enums import ExecutionStatus, MetadataResourceType
from wharf.core.errors import IllegalOperationError
from wharf.execution.run_lifecycle import start_run
from wharf.execution.services import run_token_scope
from wharf.store.account_models import ProjectRole
from wharf.store.models import (
    OrchestratorProcess,
    RunFilter,
    ScheduleCreate,
    ScheduleRecord,
    SnapshotCreate,
)
from wharf.store.rest.errors import NotAuthenticatedError, PermissionDeniedError
from wharf.store.rest.schedule_tokens import fire_schedule, issue_schedule_token
from wharf.store.rest.store import RestStore

PROCESS = OrchestratorProcess(host="pod-1", pid=7, start="b:1", liveness_timeout_seconds=30)


@pytest.fixture
def things(world: World) -> Things:
    return Things(world)


def schedule_of(
    world: World,
    project: Any,
    name: str,
    *,
    start_time: datetime | None = None,
    end_time: datetime | None = None,
) -> ScheduleRecord:
    """A schedule of its own snapshot in ``project`` (firing between its start and end
    times)."""
    store = world.stores.store
    pipeline = store.pipelines.get_or_create(project.id, f"pipe-{name}")
    snapshot = store.snapshots.create(
        SnapshotCreate(project_id=project.id, pipeline_id=pipeline.id, spec=spec())
    )
    return store.schedules.create(
        ScheduleCreate(
            project_id=project.id,
            pipeline_id=pipeline.id,
            snapshot_id=snapshot.id,
            name=name,
            cron_expression="*/5 * * * *",
            start_time=start_time,
            end_time=end_time,
        )
    )


def token_of(world: World, schedule: ScheduleRecord, role: str = "member") -> str:
    with RestStore(world.url, world.credentials[role]) as store:
        return issue_schedule_token(store, schedule.id)


def run_count(world: World) -> int:
    return world.stores.store.runs.list(RunFilter()).total


def test_a_schedule_token_fires_its_runs_each_with_its_own_run_token(world: World) -> None:
    schedule = schedule_of(world, world.a, "nightly")
    with RestStore(world.url, token_of(world, schedule)) as pod:
        assert pod.schedules.get(schedule.id).id == schedule.id
        assert pod.snapshots.get(schedule.snapshot_id).id == schedule.snapshot_id
        fired = fire_schedule(pod, schedule.id, "kubernetes-uid-1", "nightly-1")
        again = fire_schedule(pod, schedule.id, "kubernetes-uid-1", "nightly-other")
    run = fired.run
    assert fired.created and not again.created and again.run.id == run.id
    assert run.snapshot_id == schedule.snapshot_id and run.project_id == world.a.id
    assert run.is_placeholder and run.orchestrator_run_id == "kubernetes-uid-1"
    assert run.user_id == world.users["member"].id  # the token's issuer
    recorded = world.stores.store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    assert {m.key: m.value for m in recorded} == {
        "schedule_id": str(schedule.id),
        "schedule_name": "nightly",
    }
    assert run_token_scope(fired.access_token) == run.id
    assert run_token_scope(again.access_token) == run.id
    # The run token serves the rest: the orchestrator starts, beats for and ends its run.
    with RestStore(world.url, fired.access_token) as runner:
        started = start_run(runner, run, "kubernetes-uid-1", PROCESS)
        assert started.id == run.id and started.status is ExecutionStatus.RUNNING
        runner.run_metadata.add(MetadataResourceType.PIPELINE_RUN, run.id, {"cron": "x"})
        ended = runner.runs.finish(run.id, ExecutionStatus.COMPLETED, None)
    assert ended.status is ExecutionStatus.COMPLETED
    # Each firing (orchestrator run id) gets a run of its own.
    with RestStore(world.url, token_of(world, schedule)) as pod:
        second = fire_schedule(pod, schedule.id, "kubernetes-uid-2", "nightly-2")
    assert second.created and second.run.id != run.id


def test_only_accounts_that_may_create_runs_issue_schedule_tokens(
    world: World, things: Things
) -> None:
    schedule = schedule_of(world, world.a, "s")
    path = f"/api/v1/schedules/{schedule.id}/token"
    assert world.as_role("viewer").post(path).status_code == 403
    assert world.as_role("other").post(path).status_code == 404
    assert world.as_role("anonymous").post(path).status_code == 401
    assert world.as_role("admin").post(path).status_code == 200
    run_token = world.as_role("member").post(f"/api/v1/runs/{things.run.id}/token").json()
    assert world.client(run_token["access_token"]).post(path).status_code == 403
    schedule_token = token_of(world, schedule)
    assert world.client(schedule_token).post(path).status_code == 403  # never renews itself


def test_a_leaked_schedule_token_reaches_nothing_else(world: World, things: Things) -> None:
    mine = schedule_of(world, world.a, "mine")
    sibling = schedule_of(world, world.a, "sibling")  # same project, another snapshot
    foreign = schedule_of(world, world.b, "foreign")  # another project
    twin = world.stores.store.schedules.create(  # another schedule of the same snapshot
        ScheduleCreate(
            project_id=world.a.id,
            pipeline_id=mine.pipeline_id,
            snapshot_id=mine.snapshot_id,
            name="twin",
            cron_expression="0 * * * *",
        )
    )
    with RestStore(world.url, token_of(world, twin)) as twin_pod:
        twins_run = fire_schedule(twin_pod, twin.id, "kubernetes-twin", "twin-1").run
    token = token_of(world, mine)
    pod = world.client(token)
    fired = pod.post(
        f"/api/v1/schedules/{mine.id}/runs",
        json={"orchestrator_run_id": "kubernetes-mine", "name": "mine-1"},
    ).json()["run"]
    before = run_count(world)
    fire = {"orchestrator_run_id": "kubernetes-x", "name": "x"}
    a, b = world.a.id, world.b.id
    run_body = {
        "project_id": str(a),
        "pipeline_id": str(mine.pipeline_id),
        "snapshot_id": str(mine.snapshot_id),
        "name": "direct",
    }
    refused: list[tuple[str, str, Any, int]] = [
        # another schedule or snapshot: of its project 403, of another (or none) 404
        ("GET", f"/api/v1/schedules/{sibling.id}", None, 403),
        ("GET", f"/api/v1/schedules/{foreign.id}", None, 404),
        ("GET", f"/api/v1/snapshots/{sibling.snapshot_id}", None, 403),
        ("GET", f"/api/v1/snapshots/{foreign.snapshot_id}", None, 404),
        ("GET", f"/api/v1/snapshots/{things.snapshot.id}", None, 403),
        ("POST", f"/api/v1/schedules/{sibling.id}/runs", fire, 403),
        ("POST", f"/api/v1/schedules/{twin.id}/runs", fire, 403),
        ("POST", f"/api/v1/schedules/{foreign.id}/runs", fire, 404),
        # a run the twin schedule fired, of the very same snapshot, through its run id
        (
            "POST",
            f"/api/v1/schedules/{mine.id}/runs",
            {"orchestrator_run_id": "kubernetes-twin", "name": "steal"},
            403,
        ),
        # run tokens only through a firing; runs only through a firing
        ("POST", f"/api/v1/runs/{twins_run.id}/token", None, 403),
        ("POST", f"/api/v1/runs/{fired['id']}/token", None, 403),
        ("POST", f"/api/v1/schedules/{sibling.id}/token", None, 403),
        ("POST", "/api/v1/runs", run_body, 403),
        ("POST", "/api/v1/runs/get_or_create", run_body, 403),
        # its own run is the run token's, not the schedule token's
        ("GET", f"/api/v1/runs/{fired['id']}", None, 403),
        ("PATCH", f"/api/v1/runs/{fired['id']}", {"status": "failed"}, 403),
        ("PUT", f"/api/v1/runs/{fired['id']}/heartbeat", PROCESS.model_dump(mode="json"), 403),
        # its own schedule: read only
        ("PUT", f"/api/v1/schedules/{mine.id}/active", {"active": False}, 403),
        ("DELETE", f"/api/v1/schedules/{mine.id}", None, 403),
        # anything an account does
        ("GET", f"/api/v1/runs?project_id={a}", None, 403),
        ("GET", f"/api/v1/schedules?project_id={a}", None, 403),
        ("GET", f"/api/v1/pipelines/{mine.pipeline_id}", None, 403),
        ("GET", "/api/v1/stacks", None, 403),
        ("GET", "/api/v1/users", None, 403),
        ("GET", "/api/v1/auth/me", None, 403),
        ("POST", "/api/v1/auth/logout", None, 403),
        ("GET", f"/api/v1/projects/{b}", None, 403),
    ]
    for method, path, payload, status in refused:
        answer = pod.request(method, path, json=payload)
        assert answer.status_code == status, (method, path, payload, answer.text)
    assert run_count(world) == before
    # The issuer is still logged in (the refused logout did nothing).
    assert world.as_role("member").get("/api/v1/auth/me").status_code == 200
    assert world.stores.store.schedules.get(mine.id).active


def test_deleting_the_schedule_revokes_its_token_at_once(world: World) -> None:
    schedule = schedule_of(world, world.a, "doomed")
    token = token_of(world, schedule)
    with RestStore(world.url, token) as pod:
        fire_schedule(pod, schedule.id, "kubernetes-before", "before")
        deleted = world.as_role("member").delete(f"/api/v1/schedules/{schedule.id}")
        assert deleted.status_code == 204
        with pytest.raises(NotAuthenticatedError, match="schedule has been deleted"):
            fire_schedule(pod, schedule.id, "kubernetes-after", "after")
        with pytest.raises(NotAuthenticatedError):
            pod.snapshots.get(schedule.snapshot_id)


def test_a_paused_schedule_fires_no_new_run(world: World) -> None:
    schedule = schedule_of(world, world.a, "paused")
    with RestStore(world.url, token_of(world, schedule)) as pod:
        fired = fire_schedule(pod, schedule.id, "kubernetes-early", "early")
        world.stores.store.schedules.set_active(schedule.id, False)
        assert not pod.schedules.get(schedule.id).active  # it still reads its schedule
        with pytest.raises(PermissionDeniedError, match="paused"):
            fire_schedule(pod, schedule.id, "kubernetes-late", "late")
        # A run it fired before (its pod restarted) still gets its token.
        again = fire_schedule(pod, schedule.id, "kubernetes-early", "early")
    assert again.run.id == fired.run.id and not again.created


def test_a_schedule_fires_no_new_run_outside_its_start_and_end_times(world: World) -> None:
    """The server applies the schedule's window itself (the rule a fired pod applies, on the
    server's clock): a firing before the start or after the end is refused (409) and creates
    no run; a run the schedule fired within its window (its pod restarted) still gets its
    token."""
    now = datetime.fromtimestamp(world.clock.now, UTC)
    future = schedule_of(world, world.a, "future", start_time=now + timedelta(days=1))
    ending = schedule_of(world, world.a, "ending", end_time=now + timedelta(minutes=10))
    soon = {"orchestrator_run_id": "kubernetes-soon", "name": "soon"}
    for client in (world.client(token_of(world, future)), world.as_role("member")):
        answer = client.post(f"/api/v1/schedules/{future.id}/runs", json=soon)
        assert answer.status_code == 409, answer.text
        assert "fires only between its start and end times" in answer.json()["detail"]
    assert run_count(world) == 0

    with RestStore(world.url, token_of(world, ending)) as pod:
        within = fire_schedule(pod, ending.id, "kubernetes-within", "within")
        world.clock.advance(20 * 60)  # past the end time
        with pytest.raises(IllegalOperationError, match="start and end times"):
            fire_schedule(pod, ending.id, "kubernetes-late", "late")
        again = fire_schedule(pod, ending.id, "kubernetes-within", "within")
    assert within.created and again.run.id == within.run.id and not again.created
    assert run_count(world) == 1


def test_revoking_the_issuing_key_or_role_revokes_the_schedule_token(world: World) -> None:
    schedule = schedule_of(world, world.a, "keyed")
    state = world.state
    robot = state.accounts.service_accounts.create("scheduler")
    state.accounts.memberships.set_role(world.a.id, ProjectRole.MEMBER, service_account_id=robot.id)
    key = service_key(state, robot.id)
    with RestStore(world.url, key) as submitter:
        keyed = issue_schedule_token(submitter, schedule.id)
    fire = {"orchestrator_run_id": "kubernetes-k", "name": "k"}
    path = f"/api/v1/schedules/{schedule.id}/runs"
    assert world.client(keyed).post(path, json=fire).status_code == 200
    key_id = key.split("_")[1]
    revoked = world.as_role("admin").post(
        f"/api/v1/service_accounts/{robot.id}/api_keys/{key_id}/revoke"
    )
    assert revoked.status_code == 200, revoked.text
    assert world.client(keyed).post(path, json=fire).status_code == 401

    # A user's token: logging out revokes it; losing the write role refuses new firings.
    member_token = token_of(world, schedule)
    fire = {"orchestrator_run_id": "kubernetes-m", "name": "m"}
    state.accounts.memberships.set_role(
        world.a.id, ProjectRole.VIEWER, user_id=world.users["member"].id
    )
    answer = world.client(member_token).post(path, json=fire)
    assert answer.status_code == 403 and "may no longer create runs" in answer.text
    assert world.as_role("member").post("/api/v1/auth/logout").status_code == 204
    assert world.client(member_token).post(path, json=fire).status_code == 401


def test_an_account_may_fire_a_schedule_it_may_create_runs_for(world: World) -> None:
    schedule = schedule_of(world, world.a, "manual")
    fire = {"orchestrator_run_id": "kubernetes-manual", "name": "manual-1"}
    path = f"/api/v1/schedules/{schedule.id}/runs"
    assert world.as_role("viewer").post(path, json=fire).status_code == 403
    assert world.as_role("other").post(path, json=fire).status_code == 404
    answer = world.as_role("member").post(path, json=fire)
    assert answer.status_code == 200, answer.text
    assert run_token_scope(answer.json()["access_token"]) is not None


def test_a_firing_under_an_orchestrator_run_id_no_run_may_have_is_422(world: World) -> None:
    # Edge whitespace (MariaDB's unique key ignores it) or a control character: the run's own
    # rule refused it inside the route, a 500.
    schedule = schedule_of(world, world.a, "manual")
    path = f"/api/v1/schedules/{schedule.id}/runs"
    for bad in ("kubernetes-1 ", " kubernetes-1", "kube\x0fnetes", "kube\nnetes", ""):
        fire = {"orchestrator_run_id": bad, "name": "manual-1"}
        answer = world.as_role("member").post(path, json=fire)
        assert answer.status_code == 422, (bad, answer.text)
        assert "orchestrator_run_id" in answer.json()["detail"]
    assert run_count(world) == 0


def test_a_firing_that_failed_midway_is_completed_by_its_retry(db_world: World) -> None:
    """The database refuses the fired run's schedule metadata (a trigger): the firing fails and
    leaves no run behind, so its retry creates the run, recorded with its schedule (a run
    without that record would refuse every retry: 403)."""
    world = db_world
    schedule = schedule_of(world, world.a, "flaky")
    pod = world.client(token_of(world, schedule))
    path = f"/api/v1/schedules/{schedule.id}/runs"
    fire = {"orchestrator_run_id": "kubernetes-flaky", "name": "flaky-1"}
    with refusing_metadata_key(world.stores.db.engine, "schedule_id"):
        failed = pod.post(path, json=fire)
    assert failed.status_code >= 400, failed.text
    assert run_count(world) == 0
    retried = pod.post(path, json=fire)
    assert retried.status_code == 200, retried.text
    run = retried.json()["run"]
    assert retried.json()["created"] and run["orchestrator_run_id"] == "kubernetes-flaky"
    run_id = UUID(run["id"])
    recorded = world.stores.store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run_id)
    assert {m.key: m.value for m in recorded}["schedule_id"] == str(schedule.id)


def test_a_schedule_token_reads_nothing_once_its_issuer_left_the_project(world: World) -> None:
    """Removing the issuer from the project ends the schedule token on every route (as it ends
    the issuer's run tokens), not only its firings: it no longer reads the schedule or its
    snapshot (the pipeline's spec); demoted to viewer, the same (it may no longer fire)."""
    schedule = schedule_of(world, world.a, "orphaned")
    token = token_of(world, schedule)
    pod = world.client(token)
    reads = [f"/api/v1/schedules/{schedule.id}", f"/api/v1/snapshots/{schedule.snapshot_id}"]
    for path in reads:
        assert pod.get(path).status_code == 200
    member = world.users["member"]
    removed = world.as_role("admin").delete(
        f"/api/v1/projects/{world.a.id}/members", params={"user_id": str(member.id)}
    )
    assert removed.status_code == 204, removed.text
    for path in reads:
        answer = pod.get(path)
        assert answer.status_code == 403, (path, answer.text)
        assert "may no longer create runs in project 'A'" in answer.json()["detail"]
    fire = {"orchestrator_run_id": "kubernetes-gone", "name": "gone"}
    assert pod.post(f"/api/v1/schedules/{schedule.id}/runs", json=fire).status_code == 403

    world.state.accounts.memberships.set_role(world.a.id, ProjectRole.VIEWER, user_id=member.id)
    assert pod.get(reads[0]).status_code == 403
    world.state.accounts.memberships.set_role(world.a.id, ProjectRole.MEMBER, user_id=member.id)
    assert pod.get(reads[0]).status_code == 200  # back in the project: the token works again
    assert run_count(world) == 0
