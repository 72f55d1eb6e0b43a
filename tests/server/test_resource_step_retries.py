# ruff: noqa: F811  (fixtures imported from resource_world)
"""Team mode: a step's creation retried by its client (the engine retries it through an
outage, naming the step run beforehand) makes the step's Resource Manager request once.

A create repeated after its answer was lost answers the step run written, with its request,
and makes no second one; a create repeated after the write failed in an outage gets the
request made for it back (kept for the retry, as a repeat through another replica gets it:
a request is keyed by its step run id, which the server stores for the one chosen:
``stored``). Over real HTTP:
REST store -> workspace server -> Resource Manager API; the server's database "fails" by a
patched write of the in-process server's store.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from tests.server.resource_world import (  # noqa: F401 (fixtures)
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
)
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.core.errors import RunStoppingError, StoreUnavailableError
from wharf.core.ids import new_id
from wharf.server.chosen_ids import stored_id
from wharf.store.answers import CachedOrCreated
from wharf.store.models import RunUpdate, StepRunCreate, StepRunFilter
from wharf.store.sql.repositories.batches import SqlStepRuns

DOWN = "The workspace server's database is unavailable; try again later."


def stored(step: StepRunCreate) -> UUID | None:
    """The id the workspace server stores ``step`` under (its chosen id, scoped by its run)."""
    return stored_id("step_run", step.run_id, step.id)


def requests_of(team: Team, step: StepRunCreate) -> list[tuple[Any, ResourceRequestStatus]]:
    assert team.rm_admin is not None
    made = team.rm_admin.requests.list().items
    return [(r.id, r.status) for r in made if r.metadata.get("step_run_id") == str(stored(step))]


def fail_once(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Make the next call of ``SqlStepRuns.<name>`` fail as in an outage, before writing."""
    real = getattr(SqlStepRuns, name)
    calls: list[int] = []

    def flaky(self: SqlStepRuns, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise StoreUnavailableError(DOWN)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SqlStepRuns, name, flaky)
    return calls


def test_a_create_repeated_after_its_answer_was_lost_makes_no_second_request(
    team: Team,
) -> None:
    rest = team.rest("member")
    run = team.run()
    step = team.queued(run, "train", id=new_id())
    first = rest.steps.create(step)
    again = rest.steps.create(step)  # the first answer "lost": the client asks again
    assert again.id == first.id == stored(step)
    assert again.resource_request_id == first.resource_request_id is not None
    assert requests_of(team, step) == [(first.resource_request_id, ResourceRequestStatus.ALLOCATED)]
    assert rest.steps.list(StepRunFilter(run_id=run.id)).total == 1


def test_a_cache_decision_repeated_after_its_answer_was_lost_makes_no_second_request(
    team: Team,
) -> None:
    rest = team.rest("member")
    run = team.run()
    step = team.queued(run, "train", id=new_id(), cache_key="key")
    project = team.world.a.id
    now = run.created

    def decide() -> CachedOrCreated:
        return rest.steps.find_cached_or_create(step, project, now, record_hit=True)

    first, again = decide(), decide()
    assert first.created and again.created and again.step.id == stored(step)
    assert again.step.resource_request_id == first.step.resource_request_id is not None
    assert requests_of(team, step) == [
        (first.step.resource_request_id, ResourceRequestStatus.ALLOCATED)
    ]


@pytest.mark.parametrize("call", ["create", "find_cached_or_create"])
def test_a_create_repeated_after_its_write_failed_in_an_outage_gets_the_same_request(
    team: Team, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    rest = team.rest("member")
    run = team.run()
    step = team.queued(run, "train", id=new_id(), cache_key="key")
    project = team.world.a.id

    def create() -> Any:
        if call == "create":
            return rest.steps.create(step)
        return rest.steps.find_cached_or_create(step, project, run.created).step

    calls = fail_once(monkeypatch, call)
    with pytest.raises(StoreUnavailableError):
        create()
    [(kept, status)] = requests_of(team, step)
    assert status is ResourceRequestStatus.ALLOCATED  # kept for the retry of the outage
    record = create()
    assert len(calls) == 2 and record.id == stored(step)
    assert record.status is ExecutionStatus.QUEUED
    assert record.resource_request_id == kept
    assert requests_of(team, step) == [(kept, ResourceRequestStatus.ALLOCATED)]


def test_a_create_refused_for_good_releases_the_request_made_for_it(team: Team) -> None:
    """Only an outage keeps the request for a retry: a step refused in a stopping run gives
    its request back at once."""
    rest = team.rest("member")
    run = team.run()
    rest.runs.update(run.id, RunUpdate(status=ExecutionStatus.STOPPING))
    step = team.queued(run, "late", id=new_id())
    with pytest.raises(RunStoppingError):
        rest.steps.create(step)
    [(_, status)] = requests_of(team, step)
    assert status is ResourceRequestStatus.RELEASED
