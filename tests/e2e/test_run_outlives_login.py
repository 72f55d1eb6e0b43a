"""A run on a workspace server outlives the credential that started it: once started, the run
is orchestrated with a token scoped to it (days), not with the caller's login (a password
login's access token lasts an hour). The server's token clock is moved two hours on by a step
of the run itself, in the middle of the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import steps_lib
from tests.e2e.test_rest_projects import open_as, server  # noqa: F401 (fixture)
from tests.server.conftest import World, live, world  # noqa: F401 (fixtures)
from wharf import pipeline, step
from wharf.core.enums import ExecutionStatus
from wharf.store.models import StepRunFilter
from wharf.store.rest.errors import NotAuthenticatedError

LOGIN_LIFETIME = 3600.0
"""The server's access tokens last an hour (its default)."""

CLOCKS: dict[str, World] = {}


@step
def outlive_the_login() -> int:
    CLOCKS["server"].clock.advance(2 * LOGIN_LIFETIME)
    return 21


@pipeline(name="outlives_its_login")
def outlives_its_login() -> None:
    steps_lib.double(outlive_the_login())


def test_a_run_goes_on_after_the_login_that_started_it_expired(
    server: World,  # noqa: F811
    tmp_path: Path,
) -> None:
    CLOCKS["server"] = server
    workspace = open_as(server, tmp_path / "home", "member", "A")
    try:
        run = outlives_its_login.run_in(workspace)
        with pytest.raises(NotAuthenticatedError):  # the login itself did expire
            workspace.store.runs.get(run.id)
    finally:
        CLOCKS.clear()
        workspace.close()
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    steps = server.stores.store.steps.list(StepRunFilter(run_id=run.id)).items
    assert {s.name: s.status for s in steps} == {
        "outlive_the_login": ExecutionStatus.COMPLETED,
        "double": ExecutionStatus.COMPLETED,
    }
