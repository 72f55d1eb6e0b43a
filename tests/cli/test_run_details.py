# ruff: noqa: F811  (fixtures imported from the server tests)
"""What ``wharf runs show`` reads beside the run (:mod:`wharf.cli.run_details`), in team mode:
a workspace server paired with a real Resource Manager."""

from __future__ import annotations

from pathlib import Path

from tests.server.conftest import live  # noqa: F401 (fixture)
from tests.server.resource_world import (  # noqa: F401 (fixtures)
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
)
from wharf.cli.run_details import allocations
from wharf.config.global_config import load_config
from wharf.sdk.client import Client


def test_a_team_steps_allocation_names_its_pool(team: Team, tmp_path: Path) -> None:
    """The workspace has no RM client of its own in team mode: the pool's name comes through
    the workspace server (it used to be the pool's id)."""
    step = team.rest("member").steps.create(team.queued(team.run()))
    env = {
        "WHARF_HOME": str(tmp_path),
        "WHARF_SERVER_URL": team.world.url,
        "WHARF_API_KEY": team.world.credentials["member"] or "",
        "WHARF_PROJECT": "A",
    }
    with Client(load_config(env)) as client:
        got = allocations(client, [step])
    assert got == {step.id: "1 license in pool licenses"}
