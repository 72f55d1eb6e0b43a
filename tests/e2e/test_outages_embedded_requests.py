"""A step asking for resources created while the database of a direct PostgreSQL store (and so
of its embedded Resource Manager, which keeps its tables there) is cut away
(:mod:`tests.faults.tcp_proxy`) for longer than a request's own patience (10 s): the engine
retries making the request, as it retries writing the step, for its liveness timeout, so the
step is created once with one request and the run completes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.e2e import steps_lib
from tests.e2e.test_outages_database import TIMEOUTS
from tests.e2e.test_outages_engine import LICENSE, PATIENCE, finished, outage, run_in_thread
from tests.faults.tcp_proxy import TcpProxy
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunFilter

CUT_SECONDS = 12.0
"""Longer than a request's own patience (``CREATE_PATIENCE_SECONDS``, 10 s), shorter than the
engine's at a 3 s heartbeat (16 s)."""


@pytest.fixture
def proxied_store(
    empty_database_url: Callable[[str], str], wharf_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TcpProxy]:
    """This test's store, a new PostgreSQL database reached through a proxy (short database
    timeouts), with the embedded Resource Manager."""
    database = make_url(empty_database_url("postgresql"))
    assert database.host is not None and database.port is not None
    with TcpProxy(database.host, database.port) as proxy:
        proxied = database.set(host="127.0.0.1", port=proxy.port).update_query_dict(TIMEOUTS)
        monkeypatch.setenv("WHARF_STORE_URL", proxied.render_as_string(hide_password=False))
        monkeypatch.setenv("WHARF_RESOURCE_MANAGER", "embedded")
        monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "3")
        yield proxy


def test_a_step_asking_for_resources_created_during_a_cut_gets_its_request(
    proxied_store: TcpProxy,
) -> None:
    ws = Workspace.open(load_config())
    try:
        ensure_pool(ws.resource_manager(), "licenses", {"license": 1}, account=ws.user.name)
        step = steps_lib.hold_license.with_options(settings={"resources": LICENSE})
        waiting, go = threading.Event(), threading.Event()

        @pipeline(dynamic=True)
        def p() -> None:
            waiting.set()
            go.wait(PATIENCE)
            step(label="created during the cut", seconds=0)

        thread, result = run_in_thread(p, ws)
        assert waiting.wait(PATIENCE), "the pipeline function did not start"
        proxied_store.cut("blackhole")
        go.set()  # the step's request meets the cut
        outage(CUT_SECONDS, thread)
        proxied_store.restore()
        run = finished(thread, result)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        steps = ws.store.steps.list(StepRunFilter(run_id=run.id)).items
        assert [(s.name, s.status) for s in steps] == [("hold_license", ExecutionStatus.COMPLETED)]
        rm = ws.resource_manager()
        made = [
            r for r in rm.requests.list().items if r.metadata.get("pipeline_run_id") == str(run.id)
        ]
        assert [r.status for r in made] == [ResourceRequestStatus.RELEASED], made
    finally:
        ws.close()
