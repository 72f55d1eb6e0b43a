# ruff: noqa: F811  (fixtures imported from the server tests)
"""``wharf request`` with a workspace server configured (``WHARF_SERVER_URL`` + a credential):
``list``, ``show``, ``release`` (and ``cancel``, ``explain``: tests/cli/test_team_cli.py) go
through the server and its visibility rules; ``--rm-url``
still reaches the Resource Manager directly; bad input is one line on stderr. Also
``wharf server serve``'s Resource Manager options. Real subprocesses, real servers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import run
from tests.cli.workspace_cli import live, workspace_env  # noqa: F401 (fixture)
from tests.resource_manager.api.live import ADMIN_KEY
from tests.server.resource_world import (  # noqa: F401 (fixtures)
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
)
from wharf.store.account_models import ProjectRole
from wharf.store.models import StepRunRecord


@pytest.fixture
def steps(team: Team) -> tuple[StepRunRecord, StepRunRecord]:
    mine = team.rest("member").steps.create(team.queued(team.run(), "mine"))
    theirs = team.rest("other").steps.create(team.queued(team.run("other", project="B"), "b"))
    return mine, theirs


def test_list_show_and_release_go_through_the_workspace_and_errors_are_one_line(
    team: Team, steps: tuple[StepRunRecord, StepRunRecord], tmp_path: Path
) -> None:
    mine, theirs = steps
    env = workspace_env(team, tmp_path, "member")
    listed = run("request", "list", "-o", "json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)] == [str(mine.resource_request_id)]
    table = run("request", "list", "--status", "allocated", env=env)
    assert table.returncode == 0, table.stderr
    assert str(mine.resource_request_id) in table.stdout and "alice" in table.stdout
    assert str(theirs.resource_request_id) not in table.stdout
    by_project = run("request", "list", "--project", "A", "-o", "json", env=env)
    assert len(json.loads(by_project.stdout)) == 1, by_project.stderr
    shown = run("request", "show", str(mine.resource_request_id), env=env)
    assert shown.returncode == 0, shown.stderr
    assert "allocated" in shown.stdout and "'step_name': 'mine'" in shown.stdout

    # errors are one line
    assert_one_line_error(
        run("request", "show", str(theirs.resource_request_id), env=env),
        "No resource request with id",
    )
    assert_one_line_error(
        run("request", "list", "--project", "B", env=env), "Project 'B' not found."
    )
    assert_one_line_error(
        run("request", "list", "--pool", "nosuch", env=env), "Pool 'nosuch' not found."
    )
    assert_one_line_error(
        run("request", "list", "--pool", "licences", env=env),
        "Pool 'licences' not found; did you mean 'licenses'?",
    )
    assert_one_line_error(  # through the workspace now: the RM's own refusal
        run("request", "cancel", str(mine.resource_request_id), env=env),
        "Only a pending request can be cancelled",
    )
    assert_one_line_error(
        run(
            "request",
            "release",
            str(mine.resource_request_id),
            env=workspace_env(team, tmp_path, "viewer"),
        ),
        "does not allow",
    )
    assert_one_line_error(  # a teammate's request (boss is a member of A too)
        run(
            "request",
            "release",
            str(mine.resource_request_id),
            env=workspace_env(team, tmp_path, "boss"),
        ),
        "is held by user 'member'; only they or a project admin can release it.",
    )
    released = run("request", "release", str(mine.resource_request_id), env=env)
    assert released.returncode == 0 and "released" in released.stdout, released.stderr


def test_list_asks_for_a_project_when_it_cannot_tell_which(
    team: Team, steps: tuple[StepRunRecord, StepRunRecord], tmp_path: Path
) -> None:
    world = team.world
    env = workspace_env(team, tmp_path, "member")
    loner = {**env, "WHARF_API_KEY": world.token_for(world.user("loner"))}
    assert_one_line_error(run("request", "list", env=loner), "(loner) are a member of no project")
    both = {**env, "WHARF_API_KEY": world.member("both", world.a, ProjectRole.MEMBER)}
    world.state.accounts.memberships.set_role(
        world.b.id, ProjectRole.MEMBER, user_id=world.users["both"].id
    )
    assert_one_line_error(run("request", "list", env=both), "(both) belong to several projects")
    # the selected project, as the other project-scoped commands use it
    listed = run("request", "list", "-o", "json", env={**both, "WHARF_PROJECT": "B"})
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)] == [str(steps[1].resource_request_id)]


def test_rm_url_still_reaches_the_resource_manager(
    team: Team, steps: tuple[StepRunRecord, StepRunRecord], tmp_path: Path
) -> None:
    assert team.rm is not None
    env = {
        **workspace_env(team, tmp_path, "member"),
        "WHARF_RM_URL": team.rm.url,
        "WHARF_RM_API_KEY": ADMIN_KEY,
    }
    listed = run("request", "list", "-o", "json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert {r["id"] for r in json.loads(listed.stdout)} == {
        str(s.resource_request_id) for s in steps
    }
    by_project = run("request", "list", "--project", "B", "-o", "json", env=env)
    assert [r["id"] for r in json.loads(by_project.stdout)] == [str(steps[1].resource_request_id)]


def test_serve_needs_a_token_with_a_resource_manager_url(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(tmp_path / "home")
    env["WHARF_SERVER_RESOURCE_MANAGER_URL"] = "http://127.0.0.1:1"
    for command in ("serve", "up"):
        result = run("server", command, "--secret-key", "k" * 40, env=env)
        assert_one_line_error(result, "needs --resource-manager-token")
