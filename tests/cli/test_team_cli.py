# ruff: noqa: F811  (fixtures imported from the server tests)
"""Team mode from a logged-in user's terminal: ``wharf pool list|show|queue`` and ``wharf request
explain|cancel`` through the workspace server (no RM credential), the connection options on the
commands themselves, and bad input as one line. Real subprocesses, real servers (the workspace
logged in to the RM as the non-administrator ``alice``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import run
from tests.cli.workspace_cli import live, workspace_env  # noqa: F401 (fixture)
from tests.resource_manager.api.live import ADMIN_KEY
from tests.server.resource_world import (  # noqa: F401 (fixtures)
    POOL,
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
)
from wharf.store.models import StepRunRecord


@pytest.fixture
def steps(team: Team) -> list[StepRunRecord]:
    """Three steps of project A asking for a licence each: two allocated, one pending."""
    store = team.rest("member")
    run_ = team.run()
    return [store.steps.create(team.queued(run_, f"s{i}")) for i in range(3)]


def test_a_user_sees_the_teams_pools_through_the_workspace(team: Team, tmp_path: Path) -> None:
    env = workspace_env(team, tmp_path, "member")
    listed = run("pool", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert POOL in listed.stdout and "local" not in listed.stdout  # not the embedded RM's
    as_json = json.loads(run("pool", "list", "-o", "json", env=env).stdout)
    assert [p["name"] for p in as_json] == [POOL]
    shown = run("pool", "show", POOL, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "license" in shown.stdout
    # the workspace's RM credential (alice) is not an RM administrator's: said, not hidden
    assert "Current allocations not shown" in shown.stdout and "administrator" in shown.stdout
    assert_one_line_error(run("pool", "queue", POOL, env=env), "not an RM administrator")
    resources = run("resource", "list", env=env)
    assert resources.returncode == 0, resources.stderr
    assert "license" in resources.stdout and "CPU" in resources.stdout
    assert_one_line_error(run("pool", "show", "nowhere", env=env), "nowhere")
    # a name no pool can have went into the URL as it was: another route, or a traceback
    for odd in ("a/b", "?size=1", "../resource_policies", "x\ty"):
        for args in (("pool", "show", odd), ("pool", "queue", odd), ("policy", "show", odd)):
            what = "policy" if args[0] == "policy" else "pool"
            said = odd.replace("\t", "\\t")  # as every error shows a control character
            assert_one_line_error(run(*args, env=env), f"Resource {what} '{said}' not found.")
    policies = run("policy", "list", env=env)
    assert policies.returncode == 0 and POOL in policies.stdout, policies.stderr


def test_changes_are_refused_through_the_workspace(team: Team, tmp_path: Path) -> None:
    env = workspace_env(team, tmp_path, "member")
    for args in (
        ("pool", "create", "more", "-c", "license=1"),
        ("pool", "delete", POOL, "--yes"),
        ("policy", "delete", "anything", "--yes"),  # refused before the name is looked up
        ("pool", "delete", "nosuch", "--yes"),
        ("resource", "create", "more"),
        ("resource", "delete", "license", "--yes"),
    ):
        assert_one_line_error(run(*args, env=env), "an RM administrator does that")


def test_explain_and_cancel_go_through_the_workspace(
    team: Team, steps: list[StepRunRecord], tmp_path: Path
) -> None:
    env = workspace_env(team, tmp_path, "member")
    allocated, _, pending = (str(s.resource_request_id) for s in steps)
    explained = run("request", "explain", pending, env=env)
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.startswith("pending (waiting)"), explained.stdout
    assert f"pool '{POOL}'" in explained.stdout
    assert run("request", "explain", allocated, env=env).stdout.startswith("allocated")
    assert team.rm_admin is not None
    pool_id = str(team.rm_admin.pools.get(POOL).id)
    listed = run("request", "list", env=env)
    assert POOL in listed.stdout and pool_id not in listed.stdout  # pools by name, not id
    assert "member (via alice)" in listed.stdout  # the workspace user, via the server's principal
    shown = run("request", "show", allocated, env=env)
    assert POOL in shown.stdout and pool_id not in shown.stdout
    policy = team.rm_admin.policies.get(f"{POOL}-member")  # ensure_pool's, for the member
    assert policy.name in shown.stdout and str(policy.id) not in shown.stdout
    cancelled = run("request", "cancel", pending, env=env)
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout, cancelled.stderr
    again = run("request", "cancel", pending, env=env)
    assert_one_line_error(again, "was already finished (cancelled")
    assert_one_line_error(
        run("request", "cancel", allocated, env=env), "Only a pending request can be cancelled"
    )
    theirs = team.rest("other").steps.create(team.queued(team.run("other", project="B"), "b"))
    assert_one_line_error(
        run("request", "explain", str(theirs.resource_request_id), env=env),
        "No resource request with id",
    )


def test_connection_options_work_on_the_commands(
    team: Team, steps: list[StepRunRecord], tmp_path: Path
) -> None:
    assert team.rm is not None
    env = workspace_env(team, tmp_path, "member")
    direct = run("pool", "list", "--rm-url", team.rm.url, "--api-key", ADMIN_KEY, env=env)
    assert direct.returncode == 0 and POOL in direct.stdout, direct.stderr
    # the allocations name the workspace user each request was made for, not only the
    # server's RM principal (alice) that made them all
    shown = run("pool", "show", POOL, "--rm-url", team.rm.url, "--api-key", ADMIN_KEY, env=env)
    held = [line for line in shown.stdout.splitlines() if str(steps[0].resource_request_id) in line]
    assert len(held) == 1 and "member (via alice)" in held[0], shown.stdout
    made = run(
        "pool", "create", "extra", "-c", "license=1", "--rm-url", team.rm.url,
        "--api-key", ADMIN_KEY, env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    missing = run("request", "list", "--rm-url", team.rm.url, env=env)
    assert_one_line_error(missing, "--api-key")
    assert "WHARF_RM_API_KEY" in missing.stderr
    helped = run("policy", "show", "--help", env=env)
    assert "--rm-url" in helped.stdout and "--api-key" in helped.stdout
