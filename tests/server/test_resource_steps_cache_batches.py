# ruff: noqa: F811  (fixtures imported from resource_world)
"""Team mode: the batched cache decisions (``find_cached_or_create_many``) make the Resource
Manager requests the single call makes: a created queued step that asks for resources gets one,
a hit or a step that asks for none gets none. Over real HTTP: REST store -> workspace server ->
Resource Manager API."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.server.resource_world import (  # noqa: F401 (fixtures)
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
)
from wharf.core.enums import ExecutionStatus
from wharf.store.models import StepRunUpdate


def test_created_queued_steps_get_requests_and_hits_none(team: Team) -> None:
    run = team.run()
    rest = team.rest("member")
    done = rest.steps.create(team.queued(run, "done", cache_key="hit", resources=None))
    rest.steps.update(done.id, StepRunUpdate(status=ExecutionStatus.RUNNING))
    rest.steps.update(done.id, StepRunUpdate(status=ExecutionStatus.COMPLETED))
    steps = [
        team.queued(run, "asks", cache_key="new-1"),
        team.queued(run, "plain", cache_key="new-2", resources=None),
        team.queued(run, "cached", cache_key="hit"),
        team.queued(run, "skipped", cache_key="new-3"),
    ]
    answers = rest.steps.find_cached_or_create_many(
        steps, team.world.a.id, datetime.now(UTC), record_hit=True, create=[True, True, True, False]
    )
    asks, plain, cached, skipped = answers
    assert asks is not None and asks.created and asks.step.resource_request_id is not None
    assert plain is not None and plain.created and plain.step.resource_request_id is None
    assert cached is not None and not cached.created and cached.step.id == done.id
    assert cached.recorded is not None and cached.recorded.resource_request_id is None
    assert skipped is None
    assert team.rm_admin is not None
    made = team.rm_admin.requests.list().items
    assert [r.id for r in made] == [asks.step.resource_request_id]
    assert made[0].metadata["step_name"] == "asks"
