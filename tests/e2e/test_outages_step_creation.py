# ruff: noqa: F811  (the fixtures imported from test_outages_team_database)
"""A step created while the store's database is cut away: the workspace server's (real ``wharf
server serve`` and ``wharf resource-manager serve`` processes) or a direct PostgreSQL store's,
behind :mod:`tests.faults.tcp_proxy`.

A dynamic pipeline calls its step during an 8 s cut (long enough for several failed tries; the
15 s cuts of ``test_outages_database`` and ``test_outages_team_database`` show the rest of a
run riding one out): creating the step run (its cache decision,
and for a step that asks for resources its request) fails with 503 until the database is back
and is retried meanwhile, so the run completes with the step run written once and nothing left
held at the Resource Manager.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.e2e import steps_lib
from tests.e2e.team import Team
from tests.e2e.test_outages_database import TIMEOUTS
from tests.e2e.test_outages_engine import (
    LICENSE,
    PATIENCE,
    assert_nothing_held,
    finished,
    outage,
    run_in_thread,
    steps_of,
)
from tests.e2e.test_outages_team_database import (  # noqa: F401 (fixtures)
    HEARTBEAT_SECONDS,
    _module_proxied_team,
    _ready,
    shared_proxied_team,
)
from tests.faults.tcp_proxy import TcpProxy
from tests.waiting import wait_for
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunFilter

CUT_SECONDS = 8.0
CREATE_RETRIED = "Could not create step run produce (retrying"
CREATE_DONE = "Managed to create step run produce"


@pytest.mark.parametrize("asks", ["no resources", "a license"])
def test_a_step_created_during_a_cut_of_the_servers_database_is_created_once(
    asks: str,
    shared_proxied_team: tuple[Team, TcpProxy],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    """The pipeline function calls its step once the cut began; without retries the run fails
    with "The pipeline function raised: The workspace server's database is unavailable". Both
    cases use the module's team (starting one costs seconds of CPU)."""
    team, proxy = shared_proxied_team
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", str(HEARTBEAT_SECONDS))  # patience 26 s
    caplog.set_level(logging.INFO, logger="wharf.execution")
    ws = Workspace.open(load_config())
    http = httpx.Client()  # one client for the test's own checks of the server
    try:
        step = steps_lib.produce
        if asks == "a license":
            with team.rm_client() as rm:
                ensure_pool(rm, "licenses", {"license": 1}, account=ws.user.name)
            step = steps_lib.produce.with_options(settings={"resources": LICENSE})
        waiting, go = threading.Event(), threading.Event()

        @pipeline(dynamic=True)
        def p() -> None:
            waiting.set()
            go.wait(PATIENCE)
            step(value=2 if asks == "no resources" else 4)  # (not cached from the other case)

        thread, result = run_in_thread(p, ws)
        assert waiting.wait(PATIENCE), "the pipeline function did not start"
        proxy.cut("blackhole")
        until = time.monotonic() + CUT_SECONDS
        go.set()  # the step's creation meets the cut
        unavailable = 0
        while time.monotonic() < until:
            assert thread.is_alive(), "the run ended during the cut"
            asked = time.monotonic()
            unavailable += _ready(http, team, max(0.5, until - asked)) == 503
            # A round every half second at most: a refused connection is answered at once.
            time.sleep(max(0.0, min(asked + 0.5, until) - time.monotonic()))
        assert unavailable >= 2, "the server still reached its database during the cut"
        assert thread.is_alive(), "the run ended during the cut"
        proxy.restore()
        wait_for(lambda: _ready(http, team) == 200, "the server to reach its database again", 30)
        run = finished(thread, result)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        found = steps_of(ws, run.id)
        assert {n: s.status for n, s in found.items()} == {"produce": ExecutionStatus.COMPLETED}
        assert ws.store.steps.list(StepRunFilter(run_id=run.id)).total == 1  # written once
        messages = [r.getMessage() for r in caplog.records]
        assert any(m.startswith(CREATE_RETRIED) for m in messages), messages
        assert any(m.startswith(CREATE_DONE) for m in messages), messages
        if asks == "a license":
            assert_nothing_held(team, run)
    finally:
        http.close()
        ws.close()


@pytest.fixture
def proxied_store(
    empty_database_url: Callable[[str], str], wharf_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TcpProxy]:
    """This test's store: a new PostgreSQL database reached directly, through a proxy (with
    short database timeouts, so a cut fails calls in seconds)."""
    database = make_url(empty_database_url("postgresql"))
    assert database.host is not None and database.port is not None
    with TcpProxy(database.host, database.port) as proxy:
        proxied = database.set(host="127.0.0.1", port=proxy.port).update_query_dict(TIMEOUTS)
        monkeypatch.setenv("WHARF_STORE_URL", proxied.render_as_string(hide_password=False))
        monkeypatch.setenv("WHARF_RESOURCE_MANAGER", "none")
        yield proxy


def test_a_step_created_during_a_cut_of_a_direct_postgresql_store_is_created_once(
    proxied_store: TcpProxy, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", str(HEARTBEAT_SECONDS))  # patience 26 s
    caplog.set_level(logging.INFO, logger="wharf.execution")
    ws = Workspace.open(load_config())
    try:
        waiting, go = threading.Event(), threading.Event()

        @pipeline(dynamic=True)
        def p() -> None:
            waiting.set()
            go.wait(PATIENCE)
            steps_lib.produce(value=3)

        thread, result = run_in_thread(p, ws)
        assert waiting.wait(PATIENCE), "the pipeline function did not start"
        proxied_store.cut("blackhole")
        go.set()  # the step's creation meets the cut
        outage(CUT_SECONDS, thread)
        proxied_store.restore()
        run = finished(thread, result)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        steps = ws.store.steps.list(StepRunFilter(run_id=run.id)).items
        assert [(s.name, s.status) for s in steps] == [("produce", ExecutionStatus.COMPLETED)]
        messages = [r.getMessage() for r in caplog.records]
        assert any(m.startswith(CREATE_RETRIED) for m in messages), messages
        assert any(m.startswith(CREATE_DONE) for m in messages), messages
    finally:
        ws.close()
