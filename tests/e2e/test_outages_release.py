# ruff: noqa: F811  (the fixtures imported from test_outages_engine)
"""A step that ends while the Resource Manager is down (killed, restarted seconds later): its
release meets the outage and is retried in the background (real ``wharf … serve`` processes,
:mod:`tests.e2e.team`), so once the RM is back the request ends released by its holder and the
step waiting for the licence gets it at once, not after the ended step's lease lapsed (the
liveness timeout, the RM's downtime not counted).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import steps_lib
from tests.e2e.team import Team
from tests.e2e.test_outages_engine import (  # noqa: F401 (fixtures)
    ASC,
    LICENSE,
    PATIENCE,
    _team,
    finished,
    outage,
    queued_with_request,
    run_in_thread,
    team,
)
from tests.waiting import wait_for
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.resource_manager.contract.models import PageRequest, RequestFilter
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunFilter

HEARTBEAT_SECONDS = "3"
"""Liveness timeout, and so a holder's lease, 16 s: a release left to lapse shows."""
DOWN_SECONDS = 4.0
"""Longer than the workspace server's own retries of a release (a few seconds)."""


def test_a_release_that_met_a_resource_manager_outage_is_retried(
    team: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", HEARTBEAT_SECONDS)
    ws = Workspace.open(load_config())
    try:
        with team.rm_client() as rm:
            ensure_pool(rm, "licenses", {"license": 1}, account=ws.user.name)
        started, release = tmp_path / "started", tmp_path / "release"
        holder = steps_lib.wait_for_file.with_options(settings={"resources": LICENSE})
        waiter = steps_lib.hold_license.with_options(settings={"resources": LICENSE})

        @pipeline(dynamic=True)
        def p() -> None:
            held = holder.submit(path=str(release), started=str(started))
            wait_for(started.exists, "the holder to start", PATIENCE)
            waiting = waiter.submit(label="w", seconds=0)
            waiting.wait()
            held.wait()

        thread, result = run_in_thread(p, ws)
        wait_for(lambda: queued_with_request(ws, "hold_license"), "the waiter to queue", PATIENCE)
        team.resource_manager.stop()  # SIGKILL
        release.write_text("go")  # the holder ends, and its release meets the outage
        wait_for(lambda: _ended(ws, "wait_for_file"), "the holder to end", PATIENCE)
        outage(DOWN_SECONDS, thread)
        team.resource_manager.start()
        run = finished(thread, result)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        with team.rm_client() as rm:
            query = RequestFilter(metadata={"pipeline_run_id": str(run.id)})
            made = rm.requests.list(query, PageRequest(size=100)).items
        by_step = {r.metadata["step_name"]: r for r in made}
        held = by_step["wait_for_file"]
        assert held.status is ResourceRequestStatus.RELEASED, held.status_reason
        assert by_step["hold_license"].status is ResourceRequestStatus.RELEASED
    finally:
        ws.close()


def _ended(ws: Workspace, name: str) -> bool:
    done = ws.store.steps.list(StepRunFilter(status=ExecutionStatus.COMPLETED), ASC).items
    return any(s.name == name for s in done)
