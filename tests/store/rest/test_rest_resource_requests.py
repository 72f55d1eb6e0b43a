# ruff: noqa: F811  (fixtures imported from the server tests)
"""A workspace server's request routes (``WorkspaceRequests``, over a REST store's HTTP session)
against a server paired with a real Resource Manager: the requests link the launcher and ``wharf
request`` use (get, list, renew, release), its errors, and the launcher's allocation wait
through it with a run's credentials."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tests.server.live import LiveServer
from tests.server.resource_world import (  # noqa: F401 (fixtures)
    LICENSE,
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
)
from wharf.core.enums import ResourceRequestRuntimeState, ResourceRequestStatus
from wharf.core.errors import EntityNotFoundError
from wharf.execution.allocation import AllocationWaiter
from wharf.execution.resources.team import WorkspaceRequests
from wharf.resource_manager.contract.models import PageRequest, RequestFilter
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
