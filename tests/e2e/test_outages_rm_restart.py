"""Outages of the Resource Manager while a step holds its resources, end to end with real
processes (team mode on PostgreSQL, :mod:`tests.e2e.team`): the Resource Manager killed
(SIGKILL) and restarted, or its database cut away (:mod:`tests.faults.tcp_proxy`) and brought
back.

Either outage lasts longer than the step's lease and far less than the sweep interval. The
time no Resource Manager served must not count against the holder: the step keeps running,
its run completes and its request ends released.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from tests.e2e import steps_lib
from tests.e2e.team import Team, start_team
from tests.faults.tcp_proxy import TcpProxy
from wharf import ResourceSettings, pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter

ASC = PageRequest(sort="asc", size=1000)
HEARTBEAT_SECONDS = 1.0  # liveness, hence the step's lease: 6 s
DOWN_SECONDS = 10.0  # longer than the lease, far shorter than the sweep interval
SWEEP_SECONDS = 30.0
LEASE_BOUND = timedelta(seconds=8)
DB_TIMEOUTS = {"connect_timeout": "2", "statement_timeout": "2", "socket_timeout": "3"}


def _until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _hold_through(
    team: Team, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, outage: Callable[[], None]
) -> None:
    """Run a step that holds a licence, call ``outage`` once its heartbeat renews a short
    lease, and check that the step carries on and the run completes."""
    for name, value in team.user_env().items():
        monkeypatch.setenv(name, value)
    ws = Workspace.open(load_config())
    with team.rm_client() as rm:
        ensure_pool(rm, "licenses", {"license": 1}, account=ws.user.name)
    started, release = tmp_path / "started", tmp_path / "release"
    holder = steps_lib.wait_for_file.with_options(
        settings={"resources": ResourceSettings(resources={"license": 1})}
    )

    @pipeline(dynamic=True)
    def p() -> None:
        holder(path=str(release), started=str(started))

    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(run=p.run_in(ws)))
    thread.start()
    _until(started.exists, 60, "the step never started")
    (record,) = ws.store.steps.list(StepRunFilter(), ASC).items
    request_id = record.resource_request_id
    assert request_id is not None
    with team.rm_client() as rm:  # the heartbeat's lease replaced the first (long) one

        def short_lease() -> bool:
            lease = rm.requests.get(request_id).lease_expires_at
            return lease is not None and lease - datetime.now(UTC) < LEASE_BOUND

        _until(short_lease, 30, "the step's heartbeat never renewed its lease")

    outage()

    with team.rm_client() as rm:
        request = rm.requests.get(request_id)
        assert request.status is ResourceRequestStatus.ALLOCATED, request.status_reason
        before = request.renewed_at
        assert before is not None

        def renewed() -> bool:  # the heartbeat renews it again after the outage
            renewed_at = rm.requests.get(request_id).renewed_at
            return renewed_at is not None and renewed_at > before

        _until(renewed, 30, "the lease was never renewed after the outage")
    running = ws.store.steps.get(record.id)
    assert running.status is ExecutionStatus.RUNNING, running.status_reason

    release.write_text("go")
    thread.join(60)
    run = result["run"]
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert ws.store.steps.get(record.id).status is ExecutionStatus.COMPLETED
    with team.rm_client() as rm:
        assert rm.requests.get(request_id).status is ResourceRequestStatus.RELEASED
    ws.close()


def test_a_killed_rm_restarted_after_a_lease_keeps_its_holders(
    wharf_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    empty_database_url: Any,
) -> None:
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", str(HEARTBEAT_SECONDS))
    team = start_team(
        empty_database_url("postgresql"),
        empty_database_url("postgresql"),
        tmp_path / "team",
        sweep_interval=SWEEP_SECONDS,
    )

    def kill_and_restart() -> None:
        team.resource_manager.stop()  # SIGKILL
        time.sleep(DOWN_SECONDS)  # the outage itself: nobody can renew meanwhile
        team.resource_manager.start()

    try:
        _hold_through(team, monkeypatch, tmp_path, kill_and_restart)
    finally:
        team.stop()


def test_a_cut_rm_database_does_not_cost_holders_their_leases(
    wharf_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    empty_database_url: Any,
) -> None:
    """The Resource Manager process stays up; its database does not answer for a while."""
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", str(HEARTBEAT_SECONDS))
    database = make_url(empty_database_url("postgresql"))
    assert database.host is not None and database.port is not None
    with TcpProxy(database.host, database.port) as proxy:
        proxied = database.set(host="127.0.0.1", port=proxy.port).update_query_dict(DB_TIMEOUTS)
        team = start_team(
            proxied.render_as_string(hide_password=False),
            empty_database_url("postgresql"),
            tmp_path / "team",
            sweep_interval=SWEEP_SECONDS,
        )

        def cut_and_restore() -> None:
            proxy.cut("blackhole")
            time.sleep(DOWN_SECONDS)  # the outage itself
            proxy.restore()

        try:
            _hold_through(team, monkeypatch, tmp_path, cut_and_restore)
        finally:
            team.stop()
