# ruff: noqa: F811  (fixtures imported from the server tests)
"""A workspace server's request routes (``WorkspaceRequests``, over a REST store's HTTP session)
against a server paired with a real Resource Manager: the requests link the launcher and ``wharf
request`` use (get, list, renew, release), its errors, and the launcher's allocation wait
through it with a run's credentials."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.server.live import LiveServer
from tests.server.resource_world import (  # noqa: F401 (fixtures)
    LICENSE,
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
)
from wharf.config.global_config import load_config
from wharf.core.enums import ResourceRequestRuntimeState, ResourceRequestStatus
from wharf.core.errors import EntityNotFoundError
from wharf.execution.allocation import AllocationWaiter
from wharf.execution.resources.team import WorkspaceRequests
from wharf.resource_manager.contract.models import PageRequest, RequestFilter
from wharf.sdk.workspace import Workspace
from wharf.store.account_models import ProjectRole
from wharf.store.rest.errors import PermissionDeniedError


@pytest.fixture
def live(live_server: LiveServer) -> Iterator[LiveServer]:
    yield live_server  # the server tests' fixture name, over this package's session server


def _requests(team: Team, role_or_credential: str) -> WorkspaceRequests:
    return WorkspaceRequests(team.rest(role_or_credential).http)


def test_get_list_renew_release(team: Team) -> None:
    run = team.run()
    step = team.rest("member").steps.create(team.queued(run, "s"))
    assert step.resource_request_id is not None
    requests = _requests(team, "member")
    info = requests.get(step.resource_request_id)
    assert info.status is ResourceRequestStatus.ALLOCATED and info.metadata["step_name"] == "s"
    assert info.demands[0].resource == "license"
    found = requests.list(
        RequestFilter(status=(ResourceRequestStatus.ALLOCATED,), metadata={"step_name": "s"}),
        PageRequest(size=10),
    )
    assert [r.id for r in found.items] == [info.id] and found.total == 1
    assert requests.list(project_id=team.world.a.id).total == 1
    renewed = requests.renew(info.id, 90, ResourceRequestRuntimeState.SUBMITTED)
    assert renewed.runtime_state is ResourceRequestRuntimeState.SUBMITTED
    assert renewed.lease_expires_at is not None
    assert renewed.lease_expires_at > info.lease_expires_at  # type: ignore[operator]
    released = requests.release(info.id, idempotency_key=f"release-{info.id}")
    assert released.status is ResourceRequestStatus.RELEASED
    assert requests.release(info.id, idempotency_key=f"release-{info.id}").id == info.id


def test_errors_keep_their_types(team: Team) -> None:
    step = team.rest("member").steps.create(team.queued(team.run()))
    assert step.resource_request_id is not None
    with pytest.raises(EntityNotFoundError):
        _requests(team, "member").get(uuid.uuid4())
    with pytest.raises(EntityNotFoundError):
        _requests(team, "other").get(step.resource_request_id)
    with pytest.raises(PermissionDeniedError):
        _requests(team, "viewer").release(step.resource_request_id)


def test_list_by_ids_sees_only_visible_requests(team: Team) -> None:
    """The engine's wait room lists its waiters' requests by id; ids of another project's
    requests match nothing."""
    step = team.rest("member").steps.create(team.queued(team.run()))
    assert step.resource_request_id is not None
    query = RequestFilter(ids=(step.resource_request_id, uuid.uuid4()))
    found = _requests(team, "member").list(query).items
    assert [r.id for r in found] == [step.resource_request_id]
    assert _requests(team, "other").list(query).items == []


def test_the_launchers_allocation_wait_renews_with_the_runs_token(team: Team) -> None:
    run = team.run()
    step = team.rest("member").steps.create(team.queued(run))
    assert step.resource_request_id is not None
    requests = _requests(team, team.run_token(run))
    waiter = AllocationWaiter(requests, lambda: datetime.now(UTC), lambda _: None)
    allocated = waiter.wait(step.resource_request_id, LICENSE)
    assert allocated.status is ResourceRequestStatus.ALLOCATED
    assert team.rm_admin is not None
    info = team.rm_admin.requests.get(step.resource_request_id)
    assert info.runtime_state is ResourceRequestRuntimeState.PENDING  # renewed, never just read


def test_a_pipelines_process_lists_its_projects_requests_when_its_user_has_several(
    team: Team, tmp_path: Path
) -> None:
    """A member of two projects runs a pipeline in one: the engine's wait room and its
    end-of-run release list the run's requests by id through the workspace's link, which
    names the workspace's project (the server refuses a list naming none from such a user)."""
    team.world.state.accounts.memberships.set_role(
        team.world.b.id, ProjectRole.MEMBER, user_id=team.world.users["member"].id
    )
    step = team.rest("member").steps.create(team.queued(team.run()))
    assert step.resource_request_id is not None
    env = {
        "WHARF_HOME": str(tmp_path),
        "WHARF_SERVER_URL": team.world.url,
        "WHARF_API_KEY": team.world.credentials["member"] or "",
        "WHARF_PROJECT": "A",
    }
    workspace = Workspace.open(load_config(env))
    try:
        assert workspace.requests is not None
        found = workspace.requests.list(RequestFilter(ids=(step.resource_request_id,)))
        assert [r.id for r in found.items] == [step.resource_request_id]
    finally:
        workspace.close()
