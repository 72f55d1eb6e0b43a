"""Choosing the project over a workspace server: ``WHARF_PROJECT`` / ``wharf login --project``
let a project member run pipelines in that project; a project that does not exist or that the
caller is not a member of is one clear error (the two are indistinguishable on purpose)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import steps_lib
from tests.server.conftest import (  # noqa: F401 (fixtures)
    World,
    live,
    world,
)
from tests.server.live import shared_default_stack
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.errors import InputError
from wharf.sdk.workspace import Workspace


@pytest.fixture
def server(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> World:
    """The server fixtures' ``world``: projects A and B, principals of every role, and the
    default stack of a server started with ``--artifact-root``."""
    for name in ("WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_API_KEY", "WHARF_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    result: World = request.getfixturevalue("world")
    shared_default_stack(result.state, tmp_path / "shared-artifacts")
    return result


def open_as(server: World, home: Path, role: str, project: str | None) -> Workspace:
    env = {
        "WHARF_HOME": str(home),
        "WHARF_SERVER_URL": server.url,
        "WHARF_API_KEY": str(server.credentials[role]),
    }
    if project is not None:
        env["WHARF_PROJECT"] = project
    return Workspace.open(load_config(env))


@pipeline(name="in_a_project")
def in_a_project() -> None:
    steps_lib.double(steps_lib.produce(value=21))


def test_a_member_runs_pipelines_in_the_project_it_chose(server: World, tmp_path: Path) -> None:
    workspace = open_as(server, tmp_path / "home", "member", "A")
    try:
        assert workspace.project.id == server.a.id
        assert workspace.user.id == server.users["member"].id
        run = in_a_project.run_in(workspace)
    finally:
        workspace.close()
    assert run.status.value == "completed", run.status_reason
    assert run.project_id == server.a.id and run.user_id == server.users["member"].id


@pytest.mark.parametrize("project", ["B", "no-such-project"])
def test_a_project_that_is_missing_or_not_visible_is_one_clear_error(
    server: World, tmp_path: Path, project: str
) -> None:
    with pytest.raises(InputError) as caught:
        open_as(server, tmp_path / "home", "member", project)
    message = str(caught.value)
    assert f"Project '{project}' does not exist on the server at {server.url}" in message
    assert "or you (member) are not a member of it" in message
    assert "WHARF_PROJECT" in message and "--project" in message


def test_a_member_without_a_project_is_told_how_to_choose_one(
    server: World, tmp_path: Path
) -> None:
    with pytest.raises(InputError, match=r"Project 'default' does not exist.*WHARF_PROJECT"):
        open_as(server, tmp_path / "home", "member", None)


def test_an_admin_without_a_project_gets_the_default_one(server: World, tmp_path: Path) -> None:
    workspace = open_as(server, tmp_path / "home", "admin", None)
    try:
        assert workspace.project.name == "default"
        assert workspace.user.name == "default"  # a service account acts for the default user
    finally:
        workspace.close()


def wharf(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    return subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        capture_output=True,
        text=True,
        env={**env, "WHARF_HOME": str(home)},
        check=False,
        timeout=60,
    )


def test_login_stores_a_visible_project_and_refuses_others(server: World, tmp_path: Path) -> None:
    home = tmp_path / "home"
    key = str(server.credentials["member"])
    ok = wharf(home, "login", server.url, "--api-key", key, "--project", "A")
    assert ok.returncode == 0, ok.stderr
    assert "project 'A'" in ok.stdout
    saved = json.loads((home / "config.json").read_text())
    assert saved["project"] == "A" and saved["server_url"] == server.url
    assert load_config({"WHARF_HOME": str(home)}).project == "A"

    refused = wharf(home, "login", server.url, "--api-key", key, "--project", "B")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"Error: Project 'B' does not exist on the server at {server.url}, or you are not "
        "a member of it."
    ]
    assert json.loads((home / "config.json").read_text()) == saved  # nothing changed

    again = wharf(home, "login", server.url, "--api-key", key)  # same server: project kept
    assert again.returncode == 0, again.stderr
    assert json.loads((home / "config.json").read_text())["project"] == "A"
    out = wharf(home, "logout")
    assert out.returncode == 0, out.stderr
    assert "project" not in json.loads((home / "config.json").read_text())
