# ruff: noqa: F811  (fixtures imported from tests.server.resource_world)
"""Team mode: the workspace server's lost-run sweep ends the step of a run whose orchestrator
is gone and gives its licence back, and the request says who released it and why (it read
"Released by the holder.", though its holder was dead). Real HTTP, a real RM server."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.server.resource_world import (  # noqa: F401 (fixtures)
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
)
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.store.models import OrchestratorProcess, StepRunUpdate


def test_a_swept_steps_request_says_the_sweep_released_it(team: Team) -> None:
    rm, member = team.rm_admin, team.rest("member")
    assert rm is not None
    run = team.run()
    step = member.steps.create(team.queued(run, "hold"))
    member.steps.update(step.id, StepRunUpdate(status=ExecutionStatus.RUNNING))
    assert step.resource_request_id is not None
    assert rm.requests.get(step.resource_request_id).status is ResourceRequestStatus.ALLOCATED
    # its orchestrator, on another machine, beats once and is gone (the deadline passes at once)
    gone = OrchestratorProcess(host="elsewhere", pid=7, start="b:1", liveness_timeout_seconds=1e-6)
    member.runs.update_heartbeat(run.id, gone)

    body = {"now": datetime.now(UTC).isoformat(), "spared": []}
    answer = team.world.as_role("member").post("/api/v1/runs/lost", json=body)
    assert answer.status_code == 200, answer.text

    ended = member.steps.get(step.id)
    assert ended.status is ExecutionStatus.FAILED and ended.status_reason
    request = rm.requests.get(step.resource_request_id)
    assert request.status is ResourceRequestStatus.RELEASED
    assert request.status_reason == (
        f"Released by Wharf, as step 'hold' ended failed: {ended.status_reason.rstrip('.')}."
    )
