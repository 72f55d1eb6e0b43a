# ruff: noqa: F811  (fixtures imported from resource_world)
"""Team mode, step side: the workspace server creates a Resource Manager request for a queued
step that asks for resources (plain, batch and cached-or-create calls), renews its lease on
heartbeats, turns a reclaim into ``cancelling`` and releases the request when the step ends.
All over real HTTP: REST store -> workspace server -> Resource Manager API."""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime

import pytest

from tests.server.resource_world import (  # noqa: F401 (fixtures)
    LICENSE,
    Team,
    _rm_sqlite_template,
    db_team,
    rm_server,
    team,
    team_without_rm,
)
from wharf.config.settings import ResourceSettings
from wharf.core.enums import (
    ExecutionStatus,
    ReclaimTolerance,
    ResourceRequestRuntimeState,
    ResourceRequestStatus,
)
from wharf.core.errors import IllegalOperationError, InputError, StoreUnavailableError
from wharf.execution.lost_resources import RESOURCES_RECLAIMED
from wharf.resource_manager.contract.models import ResourceRequestCreate
from wharf.resource_manager.domain import SubjectSelector, SubjectType
from wharf.server.resource_manager import NO_RESOURCE_MANAGER
from wharf.store.models import ArtifactVersionCreate, RunCreate, StepRunRecord, StepRunUpdate
from wharf.store.sql import SqlStore


def _chains(team: Team, request_id: uuid.UUID) -> list[list[tuple[str, str]]]:
    assert team.rm_admin is not None
    info = team.rm_admin.requests.get(request_id)
    return [[(n.subject_type.value, n.subject_id) for n in c.nodes] for c in info.subjects]


def _running(team: Team, step: StepRunRecord, role: str = "member") -> StepRunRecord:
    return team.rest(role).steps.update(step.id, StepRunUpdate(status=ExecutionStatus.RUNNING))


def test_queued_step_gets_a_request_and_heartbeats_renew_it(db_team: Team) -> None:
    team, rm = db_team, db_team.rm_admin
    assert rm is not None
    run = team.run("member")
    rest = team.rest("member")
    step = rest.steps.create(team.queued(run, "train"))
    assert step.status is ExecutionStatus.QUEUED and step.resource_request_id is not None
    info = rm.requests.get(step.resource_request_id)
    assert info.status is ResourceRequestStatus.ALLOCATED
    assert info.requester == "alice"  # the workspace server's RM principal
    assert _chains(team, info.id) == [
        [("account", "member")],
        [
            ("project", str(team.world.a.id)),
            ("pipeline", str(team.snapshot.pipeline_id)),
            ("pipeline_run", str(run.id)),
            ("step_run", str(step.id)),
        ],
        [("component", str(team.stack_component_id))],
    ]
    assert info.subjects[0].nodes[0].attributes == {"name": "member", "is_superuser": False}
    assert info.metadata == {
        "step_name": "train",
        "step_run_id": str(step.id),
        "pipeline_run_name": run.name,
        "pipeline_run_id": str(run.id),
        "project": "A",
        "project_id": str(team.world.a.id),
        "user": "member",
    }
    assert info.preemption_group == SubjectSelector(
        subject_type=SubjectType.PIPELINE_RUN, subject_id=str(run.id)
    )
    assert info.reclaim_tolerance is ReclaimTolerance.ANY  # isolated, tolerance unset

    _running(team, step)
    pending_lease = info.lease_expires_at
    assert pending_lease is not None
    beat = rest.steps.update_heartbeat(step.id, 600)
    assert beat.status is ExecutionStatus.RUNNING and beat.resource_request_id == info.id
    renewed = rm.requests.get(info.id)
    assert renewed.runtime_state is ResourceRequestRuntimeState.RUNNING
    assert renewed.lease_expires_at is not None and renewed.lease_expires_at > pending_lease


def test_the_account_is_the_runs_user(team: Team) -> None:
    boss = team.world.users["boss"]
    team.world.state.accounts.credentials.set_admin(boss.id, True)
    run = team.run("boss")
    step = team.rest("boss").steps.create(team.queued(run))
    assert step.resource_request_id is not None
    assert team.rm_admin is not None
    account = team.rm_admin.requests.get(step.resource_request_id).subjects[0].nodes[0]
    assert (account.subject_id, account.attributes["is_superuser"]) == ("boss", True)


def test_a_service_account_run_names_its_user_or_its_steps_cannot_ask(team: Team) -> None:
    admin = team.rest("admin")
    snapshot = team.snapshot
    values = {
        "project_id": snapshot.project_id,
        "pipeline_id": snapshot.pipeline_id,
        "snapshot_id": snapshot.id,
        "status": ExecutionStatus.RUNNING,
    }
    anonymous_run = admin.runs.create(RunCreate(name="robot-run", **values))
    with pytest.raises(IllegalOperationError, match="records no user"):
        admin.steps.create(team.queued(anonymous_run, "s"))
    failed = admin.steps.list().items
    assert [(s.name, s.status) for s in failed] == [("s", ExecutionStatus.FAILED)]
    assert "Could not request resources" in (failed[0].status_reason or "")
    member = team.world.users["member"]
    named = admin.runs.create(RunCreate(name="for-member", user_id=member.id, **values))
    step = admin.steps.create(team.queued(named))
    assert step.resource_request_id is not None
    assert _chains(team, step.resource_request_id)[0] == [("account", "member")]


def test_steps_without_resources_and_running_steps_get_no_request(team: Team) -> None:
    run = team.run()
    rest = team.rest("member")
    plain = rest.steps.create(team.queued(run, resources=None))
    running = rest.steps.create(
        team.queued(run).model_copy(update={"status": ExecutionStatus.RUNNING})
    )
    assert plain.resource_request_id is None and running.resource_request_id is None
    assert team.rm_admin is not None and team.rm_admin.requests.list().total == 0


def test_batch_and_cached_or_create_get_requests_too(team: Team) -> None:
    run = team.run()
    rest = team.rest("member")
    batch = rest.steps.create_many(
        [team.queued(run, "a"), team.queued(run, "b", resources=None), team.queued(run, "c")]
    )
    assert [s.resource_request_id is not None for s in batch] == [True, False, True]
    assert _chains(team, batch[2].resource_request_id)[1][-1] == ("step_run", str(batch[2].id))  # type: ignore[arg-type]
    found = rest.steps.find_cached_or_create(
        team.queued(run, "d", cache_key="k1"), team.world.a.id, datetime.now(UTC)
    )
    step = found.step
    assert found.created and step.resource_request_id is not None
    assert team.rm_admin is not None
    info = team.rm_admin.requests.get(step.resource_request_id)
    assert info.metadata["step_name"] == "d" and info.metadata["step_run_id"] == str(step.id)
    assert info.preemption_group is not None and info.preemption_group.subject_id == str(run.id)


def test_a_request_made_for_a_step_cached_meanwhile_is_released(
    team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = team.run()
    rest = team.rest("member")
    first = rest.steps.create(team.queued(run, "d", cache_key="k2"))
    _running(team, first)
    rest.steps.update(first.id, StepRunUpdate(status=ExecutionStatus.COMPLETED))
    # The cache lookup before the request misses, as if that run finished just after it.
    monkeypatch.setattr(team.world.state.step_runs, "find_cached", lambda *args: None)
    found = rest.steps.find_cached_or_create(
        team.queued(run, "d", cache_key="k2"), team.world.a.id, datetime.now(UTC)
    )
    assert not found.created and found.step.id == first.id
    assert team.rm_admin is not None
    made = team.rm_admin.requests.list().items
    assert len(made) == 2  # the first step's, and the one made for nothing
    assert {r.status for r in made} == {ResourceRequestStatus.RELEASED}


def test_a_failed_batch_fails_every_step_that_asked(team: Team) -> None:
    run = team.run()
    rest = team.rest("member")
    too_much = ResourceSettings(resources={"unknown-resource": 1})
    with pytest.raises(InputError, match="unknown-resource"):
        rest.steps.create_many([team.queued(run, "a"), team.queued(run, "b", resources=too_much)])
    steps = {s.name: s for s in rest.steps.list().items}
    assert {n: s.status for n, s in steps.items()} == {
        "a": ExecutionStatus.FAILED,
        "b": ExecutionStatus.FAILED,
    }
    assert team.rm_admin is not None
    first = team.rm_admin.requests.get(steps["a"].resource_request_id)  # type: ignore[arg-type]
    assert first.status is ResourceRequestStatus.RELEASED


def _reclaim_reason(team: Team, step: StepRunRecord) -> str:
    beat = team.rest("member").steps.update_heartbeat(step.id, 30)
    assert beat.status is ExecutionStatus.CANCELLING
    return team.rest("member").steps.get(step.id).status_reason or ""


def test_heartbeat_maps_a_released_request_to_cancelling(team: Team) -> None:
    """The step's reason says who released its request: an operator on the RM, or a project
    admin through the workspace server (recorded by the RM as the request's reason)."""
    from wharf.store.account_models import ProjectRole

    step, other = (team.rest("member").steps.create(team.queued(team.run())) for _ in "ab")
    _running(team, step)
    _running(team, other)
    assert team.rm_admin is not None and step.resource_request_id is not None
    team.rm_admin.requests.release(step.resource_request_id)  # an operator takes it back
    reason = _reclaim_reason(team, step)
    assert f"resource request {step.resource_request_id} is released" in reason
    assert "Released by Resource Manager administrator 'admin'" in reason
    world = team.world
    lead = world.client(world.member("lead", world.a, ProjectRole.ADMIN))
    path = f"/api/v1/resource_requests/{other.resource_request_id}/release"
    released = lead.post(path).json()
    assert released["status_reason"] == "Released by user 'lead' (project admin)."
    assert "Released by user 'lead' (project admin)" in _reclaim_reason(team, other)


def test_heartbeat_maps_a_preempting_request_to_cancelling(team: Team) -> None:
    holder = team.rest("member").steps.create(
        team.queued(team.run(), resources=ResourceSettings(resources={"license": 2}))
    )
    _running(team, holder)
    assert team.rm_admin is not None and holder.resource_request_id is not None
    urgent = team.rest("boss").steps.create(team.queued(team.run("boss")))
    assert team.rm_admin.requests.get(urgent.resource_request_id).status is (  # type: ignore[arg-type]
        ResourceRequestStatus.PENDING
    )
    assert team.rm_admin.requests.get(holder.resource_request_id).status is (
        ResourceRequestStatus.PREEMPTING
    )
    # Its request was taken back for another: "was reclaimed", with the RM's reason (it said
    # "is preempting", which reads as if this step were preempting others).
    reason = _reclaim_reason(team, holder)
    assert f"resource request {holder.resource_request_id} {RESOURCES_RECLAIMED} (" in reason
    assert f"Preempted to free resources for request {urgent.resource_request_id}" in reason


def test_a_cancelling_step_keeps_renewing_until_its_shutdown_completes(team: Team) -> None:
    """The victim still uses its resources while it shuts down: its heartbeats go on renewing
    the (preempting) request's lease; its final status releases it."""
    holder = team.rest("member").steps.create(
        team.queued(team.run(), resources=ResourceSettings(resources={"license": 2}))
    )
    _running(team, holder)
    assert team.rm_admin is not None and holder.resource_request_id is not None
    team.rest("boss").steps.create(team.queued(team.run("boss")))
    assert RESOURCES_RECLAIMED in _reclaim_reason(team, holder)
    before = team.rm_admin.requests.get(holder.resource_request_id).lease_expires_at
    time.sleep(0.05)  # real seconds: the RM service stamps renewals with its own clock
    beat = team.rest("member").steps.update_heartbeat(holder.id, 600)
    assert beat.status is ExecutionStatus.CANCELLING
    after = team.rm_admin.requests.get(holder.resource_request_id)
    assert after.status is ResourceRequestStatus.PREEMPTING
    assert before is not None and after.lease_expires_at is not None
    assert after.lease_expires_at > before
    team.rest("member").steps.update(
        holder.id, StepRunUpdate(status=ExecutionStatus.CANCELLED, status_reason="reclaimed")
    )
    assert team.rm_admin.requests.get(holder.resource_request_id).status is (
        ResourceRequestStatus.PREEMPTED
    )


def test_heartbeat_maps_a_missing_request_to_cancelling(team: Team) -> None:
    step = team.rest("member").steps.create(team.queued(team.run()))
    _running(team, step)
    gone = uuid.uuid4()
    # Straight into the database: the server never lets a caller point a step at a request.
    direct = SqlStore.open(team.world.stores.store.url)
    try:
        direct.steps.update(step.id, StepRunUpdate(resource_request_id=gone))
    finally:
        direct.close()
    assert f"resource request {gone} is gone" in _reclaim_reason(team, step)


def test_callers_cannot_point_a_step_at_another_request(team: Team) -> None:
    rest = team.rest("member")
    run = team.run()
    mine = rest.steps.create(team.queued(run))
    theirs = team.rest("other").steps.create(team.queued(team.run("other", project="B")))
    changed = rest.steps.update(
        mine.id, StepRunUpdate(resource_request_id=theirs.resource_request_id)
    )
    assert changed.resource_request_id == mine.resource_request_id


@pytest.mark.parametrize("end", ["update", "finish", "retrying"])
def test_the_request_is_released_when_the_step_ends(team: Team, end: str) -> None:
    rest = team.rest("member")
    step = rest.steps.create(team.queued(team.run()))
    _running(team, step)
    if end == "update":
        rest.steps.update(step.id, StepRunUpdate(status=ExecutionStatus.FAILED))
    elif end == "retrying":
        rest.steps.update(step.id, StepRunUpdate(status=ExecutionStatus.RETRYING))
    else:
        output = ArtifactVersionCreate(
            project_id=team.world.a.id, name="out", uri="/x", data_type="t", materializer="m"
        )
        rest.steps.finish(step.id, StepRunUpdate(status=ExecutionStatus.COMPLETED), {"out": output})
    assert team.rm_admin is not None and step.resource_request_id is not None
    released = team.rm_admin.requests.get(step.resource_request_id)
    assert released.status is ResourceRequestStatus.RELEASED


def test_rm_down_heartbeats_keep_running_and_creation_answers_503_writing_nothing(
    team: Team,
) -> None:
    rest = team.rest("member")
    run = team.run()
    step = rest.steps.create(team.queued(run))
    _running(team, step)
    assert team.rm is not None
    team.rm.stop()
    started = time.monotonic()
    beat = rest.steps.update_heartbeat(step.id, 30)
    assert beat.status is ExecutionStatus.RUNNING  # the lease still holds: keep going
    assert time.monotonic() - started < 5
    with pytest.raises(StoreUnavailableError, match="Resource Manager"):
        rest.steps.create(team.queued(run, "late"))
    # An outage, not the step's end: nothing is written, so the engine's retry of the same step
    # asks again (a step written failed here would fail its run, however short the outage).
    assert [s.name for s in rest.steps.list().items] == [step.name]
    rest.steps.update(step.id, StepRunUpdate(status=ExecutionStatus.COMPLETED))  # logged only


def test_without_a_resource_manager_asking_steps_fail_at_creation(
    team_without_rm: Team, caplog: pytest.LogCaptureFixture
) -> None:
    team = team_without_rm
    rest = team.rest("member")
    run = team.run()
    with pytest.raises(IllegalOperationError, match="no Resource Manager"):
        rest.steps.create(team.queued(run, "wants"))
    plain = rest.steps.create(team.queued(run, resources=None))
    _running(team, plain)
    with caplog.at_level(logging.WARNING, logger="wharf.execution.resources.requester"):
        assert rest.steps.update_heartbeat(plain.id, 30).status is ExecutionStatus.RUNNING
        rest.steps.update(plain.id, StepRunUpdate(status=ExecutionStatus.COMPLETED))
    assert caplog.records == []  # a step without a request never reaches for the RM
    wants = next(s for s in rest.steps.list().items if s.name == "wants")
    assert wants.status is ExecutionStatus.FAILED
    assert wants.status_reason == f"Could not request resources: {NO_RESOURCE_MANAGER}"


def test_requests_made_elsewhere_are_not_the_workspaces(team: Team) -> None:
    """A request the RM got from someone else is not the workspace's: the RM shows the
    workspace's principal only the requests it made, so nobody sees it through the workspace,
    its administrators included (as for an unknown id)."""
    assert team.rm_admin is not None
    foreign = team.rm_admin.requests.create(
        ResourceRequestCreate.model_validate(
            {
                "subjects": [{"nodes": [{"subject_type": "account", "subject_id": "member"}]}],
                "demands": [{"resource": "license", "quantity": 1}],
                "lease_seconds": 60,
            }
        )
    )
    assert team.rm_admin.requests.get(foreign.id).id == foreign.id
    for role in ("admin", "member"):
        client = team.world.as_role(role)
        assert client.get(f"/api/v1/resource_requests/{foreign.id}").status_code == 404


def test_the_server_store_only_stores(team: Team) -> None:
    """The step routes write through the step-resource service; the store is not wrapped."""
    from wharf.server.step_resources import StepResourceService

    state = team.world.state
    assert not isinstance(state.store.steps, StepResourceService)
    assert not hasattr(state.store, "resource_requests")
    assert isinstance(state.step_runs, StepResourceService)


@pytest.mark.parametrize(
    ("resources", "named"),
    [
        (ResourceSettings(resources=[{"kind": "license", "resource_selector": {"x": 1}}]), "x"),
        (ResourceSettings(resources={f"r{i}": 1 for i in range(65)}), "demands"),
    ],
    ids=["bad-selector", "too-many-demands"],
)
def test_settings_the_rm_would_refuse_are_a_400_naming_them(
    team: Team, resources: ResourceSettings, named: str
) -> None:
    run = team.run()
    step = team.queued(run, "odd", resources=resources)
    answer = team.world.as_role("member").post(
        "/api/v1/steps", json=step.model_dump(mode="json", exclude_none=True)
    )
    assert answer.status_code == 400, answer.text
    detail = answer.json()["detail"]
    assert "\n" not in detail and "'odd'" in detail and named in detail, detail
    (stored,) = team.rest("member").steps.list().items
    assert stored.status is ExecutionStatus.FAILED
