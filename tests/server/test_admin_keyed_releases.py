# ruff: noqa: F811  (fixtures imported from resource_world)
"""The README's team set-up, where the workspace server logs in to the Resource Manager with the
RM administrator's key, so the server's requests are the administrator's own: an
administrator's ``wharf request release`` / ``cancel`` on the RM still reads as theirs (not as
the holder's), while a step that ends releases its request as its holder. Real HTTP throughout:
the CLI in a subprocess -> RM API; REST store -> workspace server -> RM API."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_cli import wharf
from tests.resource_manager.api.live import ADMIN_KEY
from tests.server.resource_world import (  # noqa: F401 (fixtures)
    Team,
    _rm_sqlite_template,
    admin_keyed_team,
    rm_server,
)
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.store.models import StepRunRecord, StepRunUpdate

ADMIN = "Resource Manager administrator 'admin'"


def _update(team: Team, step: StepRunRecord, status: ExecutionStatus) -> StepRunRecord:
    return team.rest("member").steps.update(step.id, StepRunUpdate(status=status))


def test_an_admins_release_on_the_rm_names_them_though_the_server_shares_their_key(
    admin_keyed_team: Team, tmp_path: Path
) -> None:
    team = admin_keyed_team
    rm, member = team.rm_admin, team.rest("member")
    assert rm is not None and team.rm is not None
    run = team.run()
    taken, ending, waiting = (member.steps.create(team.queued(run)) for _ in range(3))
    ids = [s.resource_request_id for s in (taken, ending, waiting)]
    assert None not in ids
    requests = [rm.requests.get(i) for i in ids]  # type: ignore[arg-type]
    assert {r.requester for r in requests} == {"admin"}  # the server's requests are the admin's
    assert [r.status for r in requests] == [
        ResourceRequestStatus.ALLOCATED,
        ResourceRequestStatus.ALLOCATED,
        ResourceRequestStatus.PENDING,  # two licenses
    ]
    for step in (taken, ending):
        _update(team, step, ExecutionStatus.RUNNING)
    env = {"WHARF_HOME": str(tmp_path / "home"), "WHARF_RM_URL": team.rm.url}
    env["WHARF_RM_API_KEY"] = ADMIN_KEY

    cancelled = wharf("request", "cancel", str(ids[2]), env=env)
    assert cancelled.returncode == 0, cancelled.stderr
    assert rm.requests.get(ids[2]).status_reason == f"Cancelled by {ADMIN}."  # type: ignore[arg-type]
    released = wharf("request", "release", str(ids[0]), env=env)
    assert released.returncode == 0, released.stderr
    assert rm.requests.get(ids[0]).status_reason == f"Released by {ADMIN}."  # type: ignore[arg-type]
    beat = member.steps.update_heartbeat(taken.id, 30)  # the step is told who took it back
    assert beat.status is ExecutionStatus.CANCELLING
    assert f"Released by {ADMIN}" in (member.steps.get(taken.id).status_reason or "")

    _update(team, ending, ExecutionStatus.COMPLETED)  # its holder ends it
    assert rm.requests.get(ids[1]).status_reason == "Released by the holder."  # type: ignore[arg-type]
