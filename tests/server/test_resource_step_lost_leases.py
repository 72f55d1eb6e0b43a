# ruff: noqa: F811  (fixtures imported from tests.server.resource_world)
"""Team mode: a running step whose lease expired is cancelled saying what kept its renewals from
the Resource Manager: the RM unreachable from the workspace server, or no heartbeat of the step
reaching the workspace server (the server itself unreachable from the step). Over real HTTP,
the RM on a fake clock (its leases lapse when the test says), the workspace server reaching it
through a TCP proxy the test cuts (the RM stays up: a restart of the RM extends live leases)."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FakeClock
from tests.faults.tcp_proxy import TcpProxy
from tests.resource_manager.api.live import LiveServer as RmServer
from tests.resource_manager.api.live import start_rm
from tests.server.live import LiveServer
from tests.server.resource_world import (  # noqa: F401 (fixtures)
    Team,
    _rm_sqlite_template,
    make_team,
)
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.execution.lost_resources import RESOURCES_LOST, RM_UNREACHABLE
from wharf.store.models import StepRunRecord, StepRunUpdate

LIVENESS_SECONDS = 30
LAPSE_SECONDS = 10 * LIVENESS_SECONDS
"""Longer than any lease of the step (the server renews for a little more than the liveness
timeout), shorter than an RM outage it would extend leases for (hours, on a fake clock)."""


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rm(tmp_path: Path, clock: FakeClock, _rm_sqlite_template: Path) -> Iterator[RmServer]:
    path = tmp_path / "rm.db"
    shutil.copyfile(_rm_sqlite_template, path)
    server = start_rm(f"sqlite:///{path}", clock=clock)
    yield server
    server.stop()


@pytest.fixture
def proxy(rm: RmServer) -> Iterator[TcpProxy]:
    with TcpProxy("127.0.0.1", rm.port) as forwarding:
        yield forwarding


@pytest.fixture
def clocked_team(
    live: LiveServer, rm: RmServer, proxy: TcpProxy, tmp_path: Path, _sqlite_template: Path
) -> Iterator[Team]:
    """A team whose workspace server reaches ``rm`` through ``proxy`` (the test's RM admin
    client too: cut, nothing reaches the RM)."""
    path = tmp_path / "server.db"
    shutil.copyfile(_sqlite_template, path)
    behind_proxy = copy.copy(rm)
    behind_proxy.url = f"http://127.0.0.1:{proxy.port}"
    yield from make_team(live, f"sqlite:///{path}", behind_proxy)


def _running_step(team: Team) -> StepRunRecord:
    rest = team.rest("member")
    step = rest.steps.create(team.queued(team.run()))
    rest.steps.update(step.id, StepRunUpdate(status=ExecutionStatus.RUNNING))
    beat = rest.steps.update_heartbeat(step.id, LIVENESS_SECONDS)  # lease: the liveness timeout
    assert beat.status is ExecutionStatus.RUNNING
    return step


def _cancelled_reason(team: Team, step: StepRunRecord) -> str:
    rest = team.rest("member")
    assert rest.steps.update_heartbeat(step.id, LIVENESS_SECONDS).status is (
        ExecutionStatus.CANCELLING
    )
    assert team.rm_admin is not None and step.resource_request_id is not None
    request = team.rm_admin.requests.get(step.resource_request_id)
    assert request.status is ResourceRequestStatus.EXPIRED
    return rest.steps.get(step.id).status_reason or ""


def test_heartbeats_that_did_not_reach_the_server_are_not_blamed_on_the_rm(
    clocked_team: Team, clock: FakeClock
) -> None:
    step = _running_step(clocked_team)
    clock.advance(LAPSE_SECONDS)  # no heartbeat reached the workspace server meanwhile
    reason = _cancelled_reason(clocked_team, step)
    assert RESOURCES_LOST in reason and "workspace server" in reason, reason
    assert "Resource Manager" not in reason, reason


def test_renewals_that_did_not_reach_the_rm_say_so(
    clocked_team: Team, clock: FakeClock, proxy: TcpProxy
) -> None:
    step = _running_step(clocked_team)
    proxy.cut()
    beat = clocked_team.rest("member").steps.update_heartbeat(step.id, LIVENESS_SECONDS)
    assert beat.status is ExecutionStatus.RUNNING  # the renewal failed; the lease still holds
    clock.advance(LAPSE_SECONDS)
    proxy.restore()
    reason = _cancelled_reason(clocked_team, step)
    assert f"{RESOURCES_LOST} {RM_UNREACHABLE}" in reason, reason
