# ruff: noqa: F811  (fixtures imported from the server tests)
"""``wharf user | project | service-account | api-key`` against a real workspace server, as its
administrator and as a plain member; bad input and refusals as one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx

from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import run
from tests.cli.workspace_cli import live, workspace_env  # noqa: F401 (fixture)
from tests.server.resource_world import (  # noqa: F401 (fixtures)
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
)


def ok(*args: str, env: dict[str, str]) -> str:
    result = run(*args, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _login(url: str, name: str, password: str) -> int:
    answer = httpx.post(
        f"{url}/api/v1/auth/login", json={"username": name, "password": password}, timeout=30
    )
    return answer.status_code


def _active(env: dict[str, str]) -> dict[str, str]:
    """User name -> the ACTIVE column of ``user list``, for carol and member."""
    lines = ok("user", "list", env=env).splitlines()
    assert lines[0].split()[:3] == ["NAME", "IS_ADMIN", "ACTIVE"]
    cells = (line.split() for line in lines[1:])
    return {row[0]: row[2] for row in cells if row[0] in ("carol", "member")}


def test_users_are_created_listed_updated_and_deactivated(team: Team, tmp_path: Path) -> None:
    env = workspace_env(team, tmp_path, "admin")
    url = team.world.url
    assert "Created user 'carol'" in ok(
        "user", "create", "carol", "--password", "carol-pw-1234", env=env
    )
    names = [line.split()[0] for line in ok("user", "list", env=env).splitlines()[1:]]
    assert {"carol", "member"} <= set(names)  # the list's JSON: test_admin_cli_checks.py
    assert _login(url, "carol", "carol-pw-1234") == 200
    ok("user", "update", "carol", "--admin", "--password", "carol-pw-5678", env=env)
    carol = team.world.as_role("admin").get("/api/v1/users/by-name", params={"name": "carol"})
    assert carol.json()["is_admin"] is True
    assert _login(url, "carol", "carol-pw-5678") == 200
    unasked = run("user", "delete", "carol", env=env)  # no terminal to ask on, no --yes
    assert_one_line_error(unasked, "there is no terminal to answer on; add --yes to confirm")
    assert _login(url, "carol", "carol-pw-5678") == 200
    assert "Deactivated user 'carol'" in ok("user", "delete", "carol", "--yes", env=env)
    assert _login(url, "carol", "carol-pw-5678") == 403  # told the account is deactivated
    assert _active(env) == {"carol": "False", "member": "True"}
    ok("user", "update", "carol", "--active", env=env)
    assert _login(url, "carol", "carol-pw-5678") == 200
    assert _active(env) == {"carol": "True", "member": "True"}
    assert_one_line_error(run("user", "create", "carol", "--no-password", env=env), "carol")
    unasked = run("user", "create", "dave", env=env)  # no terminal to ask for a password on
    assert_one_line_error(unasked, "no terminal to ask for the password on: give --password")
    assert_one_line_error(run("user", "update", "nobody", "--admin", env=env), "nobody")
    # said at once, not after a question answered with "Aborted." (no input here)
    assert_one_line_error(run("user", "delete", "nobody", env=env), "No user named 'nobody'.")
    assert_one_line_error(
        run("user", "delete", "carl", env=env), "No user named 'carl'; did you mean 'carol'?"
    )
    assert_one_line_error(run("user", "update", "carol", env=env), "Nothing to change")


def test_projects_and_members(team: Team, tmp_path: Path) -> None:
    env = workspace_env(team, tmp_path, "admin")
    assert "Created project 'vision'" in ok("project", "create", "vision", env=env)
    added = ok("project", "add-member", "vision", "--user", "member", "--role", "viewer", env=env)
    assert "User 'member' is now viewer of project 'vision'" in added
    member_env = workspace_env(team, tmp_path, "member")
    assert "vision" in ok("project", "list", env=member_env)  # members see their projects
    ok("project", "remove-member", "vision", "--user", "member", "--yes", env=env)
    assert "vision" not in ok("project", "list", env=member_env)
    assert_one_line_error(run("project", "add-member", "vision", env=env), "exactly one of")
    assert_one_line_error(
        run("project", "add-member", "visoin", "--user", "member", env=env),
        "No project named 'visoin'; did you mean 'vision'?",
    )
    assert_one_line_error(run("project", "create", "nope", env=member_env), "admin")
    assert_one_line_error(
        run("project", "add-member", "nowhere", "--user", "member", env=env), "nowhere"
    )
    assert_one_line_error(  # by name, not the ids the server's message has
        run("project", "remove-member", "vision", "--user", "member", env=env),
        "User 'member' is not a member of project 'vision'.",
    )


def test_service_accounts_and_their_keys(team: Team, tmp_path: Path) -> None:
    env = workspace_env(team, tmp_path, "admin")
    url = team.world.url
    ok("service-account", "create", "ci", "--description", "the CI", env=env)
    listed = json.loads(ok("service-account", "list", "-o", "json", env=env))
    assert any(a["name"] == "ci" and a["description"] == "the CI" for a in listed)
    assert_one_line_error(
        run("service-account", "create", "ci2", "--description", "the\nCI", env=env),
        "'description': must be one line without control characters (found U+000A)",
    )
    assert_one_line_error(
        run("api-key", "list", "cii", env=env),
        "No service account named 'cii'; did you mean 'ci'?",
    )
    made = run("api-key", "create", "ci", "--name", "deploy", env=env)
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    assert "shown once" in made.stderr
    ok("project", "add-member", "A", "--service-account", "ci", env=env)
    me = httpx.get(f"{url}/api/v1/auth/me", headers={"authorization": f"Bearer {secret}"})
    assert me.status_code == 200 and me.json()["name"] == "ci"
    assert "Revoked API key 'deploy'" in ok("api-key", "revoke", "ci", "deploy", "-y", env=env)
    me = httpx.get(f"{url}/api/v1/auth/me", headers={"authorization": f"Bearer {secret}"})
    assert me.status_code == 401
    # said at once, before any question (no terminal here)
    assert_one_line_error(run("api-key", "revoke", "ci", "deploy", env=env), "no active API key")
    assert_one_line_error(
        run("api-key", "create", "ci", "--name", "deploy", env=env),
        "Service account 'ci' already has an API key named 'deploy' (a revoked key keeps its name)",
    )
    assert_one_line_error(run("api-key", "create", "ghost", env=env), "No service account")
    # the keys 'revoke' takes, by name or id, can be looked up: never their secrets
    (key,) = json.loads(ok("api-key", "list", "ci", "-o", "json", env=env))
    assert key["name"] == "deploy" and key["revoked_at"] is not None and "secret" not in key
    table = ok("api-key", "list", "ci", env=env).splitlines()
    assert table[0].split() == ["NAME", "CREATED", "LAST_USED", "REVOKED_AT", "ID"]
    assert table[1].startswith("deploy ") and table[1].endswith(key["id"])
    assert secret not in "".join(table)
    assert_one_line_error(run("api-key", "list", "ghost", env=env), "No service account")


def test_without_a_server_the_commands_say_how_to_log_in(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(tmp_path / "home")
    for args in (("user", "list"), ("project", "list"), ("service-account", "list")):
        assert_one_line_error(run(*args, env=env), "wharf login")


def test_a_password_and_its_opposite_flag_are_refused_before_any_request(tmp_path: Path) -> None:
    """``--no-password --password X`` used to create the user with password X (and
    ``--password X --set-password`` to skip the prompt): contradictory options are one line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(tmp_path / "home")
    for args, message in [
        (("user", "create", "kim", "--no-password", "--password", "a-long-one"), "--no-password"),
        (("user", "update", "kim", "--password", "a-long-one", "--set-password"), "--set-password"),
    ]:
        result = run(*args, env=env)
        assert_one_line_error(result, f"Give --password or {message}, not both.")
        assert result.returncode == 2
