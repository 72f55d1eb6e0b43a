# ruff: noqa: F811  (fixtures imported from resource_world)
"""Team mode: a cache decision retried by its client after its answer was lost answers the
queued step run it wrote, with its Resource Manager request, even once another run cached the
step's key meanwhile: the step runs and its request stays held by it (answering the hit would
leave the step run queued for ever, holding the request). Over real HTTP: REST store ->
workspace server -> Resource Manager API.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.server.resource_world import (  # noqa: F401 (fixtures)
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
)
from tests.server.test_resource_step_retries import requests_of, stored
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.core.ids import new_id
from wharf.store.models import PipelineRunRecord, StepRunFilter, StepRunRecord, StepRunUpdate


def complete(team: Team, key: str) -> StepRunRecord:
    """A step run of another run that completes with cache key ``key``."""
    rest = team.rest("member")
    done = rest.steps.create(team.queued(team.run(), "done", cache_key=key, resources=None))
    rest.steps.update(done.id, StepRunUpdate(status=ExecutionStatus.RUNNING))
    return rest.steps.update(done.id, StepRunUpdate(status=ExecutionStatus.COMPLETED))


def count(team: Team, run: PipelineRunRecord) -> int:
    return team.rest("member").steps.list(StepRunFilter(run_id=run.id)).total


@pytest.mark.parametrize("record_hit", [False, True])
def test_a_decision_repeated_once_its_key_was_cached_answers_the_queued_step(
    team: Team, record_hit: bool
) -> None:
    rest = team.rest("member")
    run = team.run()
    step = team.queued(run, "train", id=new_id(), cache_key="key")
    project, now = team.world.a.id, datetime.now(UTC)
    first = rest.steps.find_cached_or_create(step, project, now, record_hit=record_hit)
    complete(team, "key")
    again = rest.steps.find_cached_or_create(step, project, now, record_hit=record_hit)
    assert first.created and again.created and again.step.id == stored(step)
    assert again.step.status is ExecutionStatus.QUEUED
    assert again.step.resource_request_id == first.step.resource_request_id is not None
    assert requests_of(team, step) == [
        (first.step.resource_request_id, ResourceRequestStatus.ALLOCATED)
    ]
    assert count(team, run) == 1


def test_a_batch_repeated_once_its_keys_were_cached_answers_the_steps_written(
    team: Team,
) -> None:
    rest = team.rest("member")
    run = team.run()
    asks = team.queued(run, "asks", id=new_id(), cache_key="x")
    plain = team.queued(run, "plain", id=new_id(), cache_key="y", resources=None)
    project, now = team.world.a.id, datetime.now(UTC)
    first = rest.steps.find_cached_or_create_many([asks, plain], project, now)
    complete(team, "x"), complete(team, "y")
    again = rest.steps.find_cached_or_create_many([asks, plain], project, now)
    assert again == first
    asked, planned = again
    assert asked is not None and asked.created and asked.step.id == stored(asks)
    assert asked.step.resource_request_id is not None
    assert requests_of(team, asks) == [
        (asked.step.resource_request_id, ResourceRequestStatus.ALLOCATED)
    ]
    assert planned is not None and planned.created and planned.step.id == stored(plain)
    assert count(team, run) == 2
