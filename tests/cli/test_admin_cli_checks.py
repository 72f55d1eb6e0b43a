# ruff: noqa: F811  (fixtures imported from the server tests)
"""``wharf user | project | service-account | api-key`` against a real workspace server: their
lists page as every list does; ``api-key revoke`` and ``project remove-member`` ask first (and,
with no terminal and no ``--yes``, refuse in one line); new account names follow the account
name rule at the CLI and at the server, while accounts named before it keep working; and a
server URL without a credential says how to log in."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import httpx

from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import run
from tests.cli.workspace_cli import live, workspace_env  # noqa: F401 (fixture)
from tests.server.resource_world import (  # noqa: F401 (fixtures)
    Team,
    _rm_sqlite_template,
    team_without_rm,
)


def ok(*args: str, env: dict[str, str]) -> str:
    result = run(*args, env=env, stdin="")
    assert result.returncode == 0, result.stderr
    return result.stdout


def _names(table: str) -> list[str]:
    return [line.split()[0] for line in table.splitlines()[1:] if not line.endswith("more.")]


def _setup_accounts(admin: httpx.Client) -> dict[str, str]:
    """Three users, projects and service accounts, and keys k0..k2 of sa0, made through the HTTP
    API (their ``create`` commands are tested in test_admin_cli.py); the list path of each kind."""
    account_ids = []
    for i in range(3):
        for path, name in (("users", f"u{i}"), ("projects", f"proj{i}")):
            assert admin.post(f"/api/v1/{path}", json={"name": name}).status_code == 201
        made = admin.post("/api/v1/service_accounts", json={"name": f"sa{i}"})
        assert made.status_code == 201, made.text
        account_ids.append(made.json()["id"])
    keys = f"/api/v1/service_accounts/{account_ids[0]}/api_keys"
    for i in range(3):
        assert admin.post(keys, json={"name": f"k{i}"}).status_code == 201
    return {
        "user": "/api/v1/users",
        "project": "/api/v1/projects",
        "service-account": "/api/v1/service_accounts",
    }


def test_the_account_lists_page(team_without_rm: Team, tmp_path: Path) -> None:
    env = workspace_env(team_without_rm, tmp_path, "admin")
    paths = _setup_accounts(team_without_rm.world.as_role("admin"))

    # the whole paging checked on one kind (the table, its footer, pages, past the end, JSON)
    every = json.loads(ok("api-key", "list", "sa0", "-o", "json", env=env))
    assert [k["name"] for k in every] == ["k2", "k1", "k0"]  # newest first
    assert "more" not in ok("api-key", "list", "sa0", env=env)
    first = ok("api-key", "list", "sa0", "--size", "2", env=env)
    assert first.splitlines()[-1] == "2 of 3 shown; use --page/--size for more."
    second = ok("api-key", "list", "sa0", "--size", "2", "--page", "2", env=env)
    assert _names(first) + _names(second) == ["k2", "k1", "k0"]
    past = ok("api-key", "list", "sa0", "--page", "99", env=env).splitlines()
    assert past[-1] == "No records on this page: 3 in all; use a lower --page."
    page = json.loads(
        ok("api-key", "list", "sa0", "--size", "2", "--page", "2", "-o", "json", env=env)
    )
    assert page == every[2:4]

    # the other kinds page through the same code: a first page's table, a later page's JSON
    admin = team_without_rm.world.as_role("admin")
    for group, path in paths.items():
        whole = admin.get(path, params={"index": 1, "size": 100}).json()
        count, items = whole["total"], whole["items"]
        assert count == len(items) >= 3
        first = ok(group, "list", "--size", "2", env=env)
        assert first.splitlines()[-1] == f"2 of {count} shown; use --page/--size for more."
        assert _names(first) == [item["name"] for item in items[:2]]
        page = json.loads(ok(group, "list", "--size", "2", "--page", "2", "-o", "json", env=env))
        assert page == items[2:4]  # newest first, as the whole list


def _me(url: str, secret: str) -> int:
    headers = {"authorization": f"Bearer {secret}"}
    return httpx.get(f"{url}/api/v1/auth/me", headers=headers, timeout=30).status_code


def _at_a_terminal(args: list[str], env: dict[str, str], answer: str) -> str:
    """Run ``wharf ARGS`` with a real terminal as its stdin, answering ``answer``; its stdout."""
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "wharf.cli.main", *args],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
        )
        os.close(follower)
        follower = -1
        os.write(leader, answer.encode())  # held by the terminal until the command reads it
        out, _ = process.communicate(timeout=60)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    return out


def test_revoke_and_remove_member_ask_first(team_without_rm: Team, tmp_path: Path) -> None:
    env = workspace_env(team_without_rm, tmp_path, "admin")
    url = team_without_rm.world.url
    admin = team_without_rm.world.as_role("admin")  # the setup's commands: test_admin_cli.py
    account = admin.post("/api/v1/service_accounts", json={"name": "ci"}).json()
    made = admin.post(f"/api/v1/service_accounts/{account['id']}/api_keys", json={"name": "deploy"})
    secret = made.json()["secret"]
    project_a = admin.get("/api/v1/projects/by-name", params={"name": "A"}).json()["id"]
    member = {"service_account_id": account["id"], "role": "member"}
    assert admin.put(f"/api/v1/projects/{project_a}/members", json=member).status_code == 200

    # no terminal, no --yes: one line, nothing done, and no wait for an answer
    refused = run("api-key", "revoke", "ci", "deploy", env=env, stdin="")
    assert_one_line_error(refused, "no terminal to answer on; add --yes to confirm")
    assert _me(url, secret) == 200
    refused = run("project", "remove-member", "A", "--service-account", "ci", env=env, stdin="")
    assert_one_line_error(refused, "no terminal to answer on; add --yes to confirm")
    members = team_without_rm.world.client(secret).get("/api/v1/projects").json()["items"]
    assert [p["name"] for p in members] == ["A"]

    # at a terminal: "n" keeps the key, "y" revokes it
    declined = _at_a_terminal(["api-key", "revoke", "ci", "deploy"], env, "n\n")
    assert "Revoke API key 'deploy' of service account 'ci'" in declined and "Aborted" in declined
    assert _me(url, secret) == 200
    confirmed = _at_a_terminal(["api-key", "revoke", "ci", "deploy"], env, "y\n")
    assert "Revoked API key 'deploy'" in confirmed
    assert _me(url, secret) == 401

    removed = ok("project", "remove-member", "A", "--service-account", "ci", "--yes", env=env)
    assert removed.strip() == "Removed service account 'ci' from project 'A'."
    assert_one_line_error(  # not a member: said before any question
        run("project", "remove-member", "A", "--service-account", "ci", env=env, stdin=""),
        "Service account 'ci' is not a member of project 'A'.",
    )


def test_new_account_names_follow_the_rule(team_without_rm: Team, tmp_path: Path) -> None:
    env = workspace_env(team_without_rm, tmp_path, "admin")
    world = team_without_rm.world
    for args, what in [
        (("user", "create", "bad/name", "--no-password"), "user"),
        (("user", "create", "two words", "--password", "a-long-password"), "user"),
        (("project", "create", "a/b"), "project"),
        (("service-account", "create", "ci bot"), "service account"),
    ]:
        result = run(*args, env=env, stdin="")
        assert_one_line_error(result, f"A {what} name may hold only letters, digits")
    for path in ("users", "projects", "service_accounts"):
        answer = world.as_role("admin").post(f"/api/v1/{path}", json={"name": "bad/name"})
        assert answer.status_code == 400, answer.text
        assert answer.json()["type"] == "InputError" and "may hold only" in answer.json()["detail"]
    admin = world.as_role("admin")  # nothing was made
    names = {u["name"] for u in admin.get("/api/v1/users", params={"size": 100}).json()["items"]}
    assert not {"bad/name", "two words"} & names
    assert {p["name"] for p in admin.get("/api/v1/projects").json()["items"]} == {"A", "B"}
    accounts = admin.get("/api/v1/service_accounts").json()["items"]
    assert "ci bot" not in {a["name"] for a in accounts}
    ok("user", "create", "ana.lópez@example.org", "--no-password", env=env)  # still fine

    # accounts named before the rule keep working
    world.user("old name/x")
    ok("user", "update", "old name/x", "--admin", env=env)
    added = ok("project", "add-member", "A", "--user", "old name/x", env=env)
    assert added.strip() == "User 'old name/x' is now member of project 'A'."
    ok("project", "remove-member", "A", "--user", "old name/x", "--yes", env=env)
    assert "old name/x" in ok("user", "list", env=env)


def test_a_server_url_without_credentials_says_how_to_log_in(
    team_without_rm: Team, tmp_path: Path
) -> None:
    env = workspace_env(team_without_rm, tmp_path, "admin")
    del env["WHARF_API_KEY"]
    url = team_without_rm.world.url
    for args in (("user", "list"), ("runs", "list"), ("stack", "list")):
        result = run(*args, env=env, stdin="")
        assert_one_line_error(result, f"Not logged in to {url}: run 'wharf login {url}'")
        assert "Authorization" not in result.stderr
    # a refused credential keeps the server's own words
    refused = run("user", "list", env={**env, "WHARF_API_KEY": "wrong-key"}, stdin="")
    assert refused.returncode == 1 and "Not logged in" not in refused.stderr
