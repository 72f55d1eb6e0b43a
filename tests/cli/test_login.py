# ruff: noqa: F811  (fixtures imported from the server tests)
"""``wharf login URL`` with a URL that cannot be a Wharf server's, or credentials the server
refuses: one line, non-zero exit, no traceback, and nothing written to the user config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import assert_one_line_error, wharf
from tests.cli.workspace_cli import live  # noqa: F401 (fixture)
from tests.server.resource_world import Team, team_without_rm  # noqa: F401 (fixture)


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("http://[::1", "Invalid Wharf server URL"),
        ("127.0.0.1:8237", "must start with http:// or https://"),
    ],
)
def test_login_refuses_a_malformed_url_in_one_line(tmp_path: Path, url: str, fragment: str) -> None:
    home = tmp_path / "home"
    result = wharf(
        "login", url, "-u", "admin", "--password", "secret-password", env={"WHARF_HOME": str(home)}
    )
    assert_one_line_error(result, fragment)
    assert not (home / "config.json").exists()


def test_login_refuses_an_api_key_with_a_line_break_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = wharf(
        "login", "http://127.0.0.1:8237", "--api-key", "wharf_abc\nx", env={"WHARF_HOME": str(home)}
    )
    assert_one_line_error(result, "copy it again")


def test_login_refuses_an_empty_api_key_instead_of_asking_for_a_username(tmp_path: Path) -> None:
    """``--api-key "$KEY"`` with KEY unset used to fall back to a password login's prompts."""
    home = tmp_path / "home"
    result = wharf("login", "http://127.0.0.1:8237", "--api-key", "", env={"WHARF_HOME": str(home)})
    assert_one_line_error(result, "'--api-key': is empty.")
    assert "Username" not in result.stdout
    empty = wharf(  # "$PASSWORD" of an unset variable: it said there was no terminal
        "login",
        "http://127.0.0.1:8237",
        "-u",
        "kim",
        "--password",
        "",
        env={"WHARF_HOME": str(home)},
    )
    assert_one_line_error(empty, "'--password': is empty.")


def test_refused_credentials_are_said_without_advice_to_log_in(
    team_without_rm: Team, tmp_path: Path
) -> None:
    """The user just ran ``wharf login``: "run 'wharf login URL'" would only repeat it."""
    world = team_without_rm.world
    world.user("pat", password="right-password")
    env = {"WHARF_HOME": str(tmp_path / "home")}
    url = world.url
    password = wharf("login", url, "-u", "pat", "--password", "wrong-password", env=env)
    assert_one_line_error(password, f"Invalid username or password. (server {url})")
    key = wharf("login", url, "--api-key", "wharf_not-a-key", env=env)
    assert_one_line_error(key, f"(server {url})")
    for refused in (password, key):
        assert "wharf login" not in refused.stderr
    assert not (tmp_path / "home" / "config.json").exists()


def test_a_server_url_with_credentials_is_refused_without_showing_them(
    team_without_rm: Team, tmp_path: Path
) -> None:
    """``httpx`` would send them as Basic auth in place of the bearer credential (every call
    refused); a URL that does not parse is refused too, its password unshown either way."""
    world = team_without_rm.world
    world.user("pat", password="pats-password")
    env = {"WHARF_HOME": str(tmp_path / "home")}
    with_credentials = world.url.replace("http://", "http://pat:pats-password@")
    shown = world.url.replace("http://", "http://pat:***@")
    login = wharf("login", with_credentials, "-u", "pat", "--password", "pats-password", env=env)
    assert_one_line_error(login, f"Invalid Wharf server URL '{shown}': credentials in the URL")
    malformed = wharf("login", "http://pat:pats-password@[::1", "--api-key", "k", env=env)
    assert_one_line_error(malformed, "Invalid Wharf server URL 'http://pat:***@[::1': ")
    env.update(WHARF_SERVER_URL=with_credentials, WHARF_API_KEY="wharf_k")
    listed = wharf("runs", "list", env=env)
    assert_one_line_error(listed, f"Invalid Wharf server URL '{shown}': credentials in the URL")
    for refused in (login, malformed, listed):
        assert "pats-password" not in refused.stdout + refused.stderr
    assert not (tmp_path / "home" / "config.json").exists()


def test_a_password_login_is_not_overridden_by_an_api_key_in_the_environment(
    team_without_rm: Team, tmp_path: Path
) -> None:
    """``WHARF_API_KEY`` left set used to win over ``-u NAME --password ...`` (the key was
    tried, and a stale one refused the login); giving both on the command line is refused."""
    world = team_without_rm.world
    world.user("kim", password="kims-password")
    env = {"WHARF_HOME": str(tmp_path / "home"), "WHARF_API_KEY": "wharf_stale-key"}
    url = world.url
    result = wharf("login", url, "-u", "kim", "--password", "kims-password", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"Logged in to {url} as user 'kim'."
    assert "WHARF_API_KEY is set in this environment" in result.stderr
    both = wharf("login", url, "-u", "kim", "--password", "x", "--api-key", "wharf_k", env=env)
    assert_one_line_error(both, "Give either --api-key or --username/--password, not both.")


def test_logout_with_an_api_key_says_the_key_stays_valid(
    team_without_rm: Team, tmp_path: Path
) -> None:
    """The server refuses to log an API key out; "Logged out" alone read as if it were revoked."""
    from tests.server.live import service_key

    world = team_without_rm.world
    account = world.state.accounts.service_accounts.create("ci")
    key = service_key(world.state, account.id)
    env = {"WHARF_HOME": str(tmp_path / "home")}
    assert wharf("login", world.url, "--api-key", key, env=env).returncode == 0
    out = wharf("logout", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        f"Logged out of {world.url}. Forgotten here only: An API key cannot log out: it stays "
        "valid until an admin revokes it (`wharf api-key revoke ACCOUNT KEY`)."
    )
    assert wharf("logout", env=env).stdout.strip() == "Not logged in."


def test_a_user_outside_the_default_project_works_in_their_only_one_or_is_told_to_choose(
    team_without_rm: Team, tmp_path: Path
) -> None:
    """Logging in as a user who is no member of project ``default`` used to succeed silently,
    and every later command failed for that project."""
    from wharf.config.global_config import read_user_config
    from wharf.store.account_models import ProjectRole

    world = team_without_rm.world
    for name, projects in (("solo", [world.a]), ("pair", [world.a, world.b]), ("lone", [])):
        user = world.user(name, password=f"{name}-password")
        for project in projects:
            world.state.accounts.memberships.set_role(
                project.id, ProjectRole.MEMBER, user_id=user.id
            )

    def login(name: str, home: str, **extra: str) -> tuple[str, str, dict[str, Any]]:
        env = {"WHARF_HOME": str(tmp_path / home), **extra}
        result = wharf("login", world.url, "-u", name, "--password", f"{name}-password", env=env)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip(), result.stderr.strip(), read_user_config(tmp_path / home)

    out, err, saved = login("solo", "solo")
    assert out == f"Logged in to {world.url} as user 'solo', project 'A' (your only project)."
    assert (err, saved["project"]) == ("", "A")
    listed = wharf("runs", "list", env={"WHARF_HOME": str(tmp_path / "solo")})
    assert listed.returncode == 0, listed.stderr

    out, err, saved = login("pair", "pair")
    assert out == f"Logged in to {world.url} as user 'pair'."
    assert err == (
        "Note: you are not a member of project 'default': choose one of yours (A, B) with "
        f"`wharf login {world.url} --project NAME`."
    )
    assert saved.get("project") is None

    out, err, _ = login("lone", "lone")
    assert err == (
        "Note: you are not a member of any project yet: a project admin adds you with "
        "`wharf project add-member PROJECT --user NAME`."
    )
    out, err, saved = login("solo", "chosen", WHARF_PROJECT="B")  # the environment chose
    assert (out, err) == (f"Logged in to {world.url} as user 'solo'.", "")
    assert saved.get("project") is None


def test_a_deactivated_user_s_login_says_so_in_one_line(
    team_without_rm: Team, tmp_path: Path
) -> None:
    world = team_without_rm.world
    user = world.user("gone", password="gones-password")
    world.state.accounts.credentials.set_active(user.id, False)
    env = {"WHARF_HOME": str(tmp_path / "home")}
    result = wharf("login", world.url, "-u", "gone", "--password", "gones-password", env=env)
    assert_one_line_error(
        result,
        "The account 'gone' is deactivated: a workspace admin reactivates it with "
        "`wharf user update gone --active`.",
    )
    assert not (tmp_path / "home" / "config.json").exists()


def test_server_status_checks_the_server_you_are_logged_in_to(
    team_without_rm: Team, tmp_path: Path
) -> None:
    """It looked only on 127.0.0.1:8237, and said no server runs while the one logged in to
    answered."""
    from tests.server.test_cli_server import free_port

    world = team_without_rm.world
    world.user("kim", password="kims-password")
    env = {"WHARF_HOME": str(tmp_path / "home")}
    logged_in = wharf("login", world.url, "-u", "kim", "--password", "kims-password", env=env)
    assert logged_in.returncode == 0, logged_in.stderr
    found = wharf("server", "status", env=env)
    assert (found.returncode, found.stdout) == (
        0,
        f"The Wharf server you are logged in to, at {world.url}: healthy.\n",
    )
    gone = f"http://127.0.0.1:{free_port()}"
    away = wharf("server", "status", env={**env, "WHARF_SERVER_URL": gone})
    assert (away.returncode, away.stdout) == (
        1,
        f"The Wharf server you are logged in to, at {gone}, does not answer.\n",
    )
    port = str(free_port())  # a place named: looked at, as before
    named = wharf("server", "status", "--port", port, env=env)
    assert (named.returncode, named.stdout) == (
        3,
        f"No Wharf server is running at http://127.0.0.1:{port}.\n",
    )
