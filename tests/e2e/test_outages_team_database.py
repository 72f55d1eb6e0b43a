"""The workspace server's database cut away for 10 s while a team-mode run is in progress (real
``wharf resource-manager serve`` and ``wharf server serve`` processes; the server reaches its
PostgreSQL through :mod:`tests.faults.tcp_proxy`, the Resource Manager its own directly).

During the cut every request that needs the server's database fails within seconds with 503;
the run's heartbeats, lease renewals and reads meet those failures and are retried until the
database is back, so the run completes and leaves nothing held at the Resource Manager.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.conftest import _server
from tests.e2e import steps_lib
from tests.e2e.team import Team, start_team
from tests.e2e.test_outages_database import TIMEOUTS
from tests.e2e.test_outages_engine import (
    ASC,
    LICENSE,
    PATIENCE,
    assert_nothing_held,
    finished,
    run_in_thread,
    steps_of,
)
from tests.faults.tcp_proxy import TcpProxy
from tests.waiting import wait_for
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunFilter

HEARTBEAT_SECONDS = 5.0
"""Liveness timeout 26 s (:mod:`tests.e2e.test_outages_step_creation`'s heartbeat)."""
CUT_SECONDS = 10.0
"""Longer than the lease at a 1 s heartbeat (6 s: the check of the held licence catches an
engine that let it lapse), and than a heartbeat interval, its first retry (a quarter interval)
and the server's answer to each (3 s, its database's socket timeout), so two beats (and lease
renewals) fail inside the cut."""
CUT_HEARTBEAT_SECONDS = 4.0
"""Liveness timeout 21 s: longer than the cut, the server's timeouts (3 s) and the step's next
beat after them (an interval at most), so a run that retries through the cut keeps its step
alive and its lease held."""
STEP_BEAT_FAILED = "Heartbeat of step 'wait_for_file' failed"
END_RETRIED = "Could not record the result of step wait_for_file (retrying"
END_RECORDED = "Managed to record the result of step wait_for_file"


@contextmanager
def _proxied_team_in(servers: dict[str, Any], workdir: Path) -> Iterator[tuple[Team, TcpProxy]]:
    """A team whose workspace server's database is behind a proxy (with short database
    timeouts, so a cut fails requests in seconds), working in ``workdir``."""
    server = _server(servers, "postgresql")
    rm_url = server.create().render_as_string(hide_password=False)
    database = make_url(server.create().render_as_string(hide_password=False))
    assert database.host is not None and database.port is not None
    with TcpProxy(database.host, database.port) as proxy:
        proxied = database.set(host="127.0.0.1", port=proxy.port).update_query_dict(TIMEOUTS)
        team = start_team(rm_url, proxied.render_as_string(hide_password=False), workdir)
        try:
            yield team, proxy
        finally:
            team.stop()


@pytest.fixture
def proxied_team(
    tmp_path: Path, _servers: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Team, TcpProxy]]:
    """A team whose workspace server's database is behind a proxy (with short database
    timeouts, so a cut fails requests in seconds); this test's store is that server."""
    with _proxied_team_in(_servers, tmp_path / "team") as (team, proxy):
        for name, value in team.user_env().items():
            monkeypatch.setenv(name, value)
        yield team, proxy


@pytest.fixture(scope="module")
def _module_proxied_team(
    tmp_path_factory: pytest.TempPathFactory, _servers: dict[str, Any]
) -> Iterator[tuple[Team, TcpProxy]]:
    """One proxied team for this module's tests (starting one costs seconds)."""
    with _proxied_team_in(_servers, tmp_path_factory.mktemp("team")) as pair:
        yield pair


@pytest.fixture
def shared_proxied_team(
    _module_proxied_team: tuple[Team, TcpProxy], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Team, TcpProxy]]:
    """The module's proxied team, this test's store; its database reached again after the
    test, whatever it cut."""
    team, proxy = _module_proxied_team
    for name, value in team.user_env().items():
        monkeypatch.setenv(name, value)
    try:
        yield team, proxy
    finally:
        proxy.restore()


def _beat_since(ws: Workspace, step_id: UUID, moment: datetime) -> bool:
    beat = ws.store.steps.get(step_id).last_heartbeat
    return beat is not None and beat > moment


def _ready(http: httpx.Client, team: Team, timeout: float = 30.0) -> int:
    """``/health/ready``'s status; 0 if it did not answer within ``timeout``."""
    try:
        return http.get(f"{team.server_url}/health/ready", timeout=timeout).status_code
    except httpx.TimeoutException:
        return 0


@pytest.mark.parametrize("step_ends", ["after the cut", "during the cut"])
def test_a_run_rides_out_a_10_s_cut_of_the_workspace_servers_database(
    step_ends: str,
    shared_proxied_team: tuple[Team, TcpProxy],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A step holding a licence runs while the server's database is blackholed for 10 s.

    The test fails if the engine did not tolerate the outage: the cut is two and a half
    heartbeat intervals long and the server answers 503 throughout (checked), so the step's
    heartbeats and lease renewals fail (checked in the log). Had the engine given up on them,
    the step (and the run) would end during the cut, which the polling catches. Once a beat gets
    through after the cut, the step must still be running and still hold its licence at the
    RM: had the engine not kept its lease alive through the cut, the RM (reached directly, so
    it keeps counting) would have expired it, which this check catches (it fails with
    ``WHARF_HEARTBEAT_INTERVAL=1``, a 6 s lease); the final statuses catch the rest.

    Ended "during the cut", the step finishes half-way through it: recording its end fails
    and is retried until the database is back (checked in the log; a retry that gave up, e.g.
    with no patience, ends the run during the cut or leaves the step not completed).
    """
    team, proxy = shared_proxied_team
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", str(CUT_HEARTBEAT_SECONDS))
    caplog.set_level(logging.INFO, logger="wharf.execution")
    ws = Workspace.open(load_config())
    http = httpx.Client()  # one client: a new one per request costs the test CPU
    try:
        with team.rm_client() as rm:
            ensure_pool(rm, "licenses", {"license": 1}, account=ws.user.name)
        started, release = tmp_path / "started", tmp_path / "release"
        holder = steps_lib.wait_for_file.with_options(settings={"resources": LICENSE})

        @pipeline
        def p() -> None:
            holder(path=str(release), started=str(started))

        thread, result = run_in_thread(p, ws)
        wait_for(started.exists, "the step to start", PATIENCE)
        started_at = datetime.now(UTC)
        running = ws.store.steps.list(StepRunFilter(status=ExecutionStatus.RUNNING), ASC).items
        assert len(running) == 1 and running[0].resource_request_id is not None
        step_id, request_id = running[0].id, running[0].resource_request_id
        # Steady state: the step's lease at the RM is what its beats renew (a liveness timeout),
        # no longer the longer first lease of its request.
        wait_for(lambda: _beat_since(ws, step_id, started_at), "the step's first beat", 30)
        proxy.cut("blackhole")
        until = time.monotonic() + CUT_SECONDS
        midway = until - CUT_SECONDS / 2
        unavailable = 0
        while time.monotonic() < until:
            asked = time.monotonic()
            assert thread.is_alive(), "the run ended during the cut"
            if step_ends == "during the cut" and asked >= midway:
                release.write_text("go")
            # Bounded by what is left of the cut, so the cut lasts 10 s, not a request more.
            unavailable += _ready(http, team, max(0.5, until - asked)) == 503
            # Once a second at most: once the server's pooled connection is gone, each new one
            # is refused at once and the server answers at once (a busy loop burns a core).
            time.sleep(max(0.0, min(asked + 1.0, until) - time.monotonic()))
        assert unavailable >= 2, "the server still reached its database during the cut"
        assert thread.is_alive(), "the run ended during the cut"
        proxy.restore()
        restored_at = datetime.now(UTC)
        wait_for(
            lambda: _ready(http, team) == 200,
            "the server to reach its database again",
            30,
            every=0.5,
        )
        if step_ends == "after the cut":
            wait_for(lambda: _beat_since(ws, step_id, restored_at), "a beat after the cut", 30)
            assert ws.store.steps.get(step_id).status is ExecutionStatus.RUNNING
            with team.rm_client() as rm:
                held = rm.requests.get(request_id)
            assert held.status is ResourceRequestStatus.ALLOCATED, held.status_reason
            release.write_text("go")
        run = finished(thread, result)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        found = steps_of(ws, run.id)
        assert {n: s.status for n, s in found.items()} == {
            "wait_for_file": ExecutionStatus.COMPLETED
        }
        assert_nothing_held(team, run)
        messages = [r.getMessage() for r in caplog.records]
        failed_beats = [m for m in messages if m.startswith(STEP_BEAT_FAILED)]
        assert len(failed_beats) >= 2, "the step's heartbeats never met the cut"
        if step_ends == "during the cut":
            assert any(m.startswith(END_RETRIED) for m in messages), messages
            assert any(m.startswith(END_RECORDED) for m in messages), messages
    finally:
        http.close()
        ws.close()
