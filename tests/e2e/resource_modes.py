"""The two modes the resource tests run in (fixture ``mode``, parametrised) and what they share:

- ``embedded``: SQLite store, the Resource Manager in-process;
- ``team``: the SDK talks to a workspace server, which talks to a Resource Manager service,
  both real ``wharf … serve`` processes on PostgreSQL (:mod:`tests.e2e.team`).

``rm_workspace`` is a workspace opened in the test's mode (closed after it); ``steps`` lists a
run's step runs, oldest first.

``shared_mode`` and ``mode_workspace`` are the same, except that the team-mode tests of a module
share one team (``_module_team``; starting one costs seconds of CPU): each test has a home of its
own, but the team's store, pools and stacks outlive it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _server
from tests.e2e.team import Team, start_team
from wharf import ResourceSettings
from wharf.config.global_config import load_config
from wharf.resource_manager.contract.protocol import ResourceManagerClient
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter

ASC = PageRequest(sort="asc", size=1000)
LICENSE = ResourceSettings(resources={"license": 1})
MODES = ("embedded", "team")


@dataclass
class Mode:
    """How the SDK reaches its store and Resource Manager in this test."""

    name: str
    team: Team | None = None

    def open(self) -> Workspace:
        return Workspace.open(load_config())

    def rm(self, workspace: Workspace) -> ResourceManagerClient:
        """The Resource Manager as whoever sets up pools: the embedded one, or the service's
        administrator."""
        if self.team is None:
            return workspace.resource_manager()
        return self.team.rm_client()

    def ensure_pool(
        self, workspace: Workspace, name: str, capacity: dict[str, Any], **options: Any
    ) -> None:
        """A pool (and its policy) admitting the workspace's user."""
        rm = self.rm(workspace)
        try:
            ensure_pool(rm, name, capacity, account=workspace.user.name, **options)
        finally:
            if self.team is not None:
                rm.close()


@pytest.fixture(params=MODES)
def mode(
    request: pytest.FixtureRequest,
    wharf_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    empty_database_url: Any,
) -> Iterator[Mode]:
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    if request.param == "embedded":
        yield Mode("embedded")
        return
    team = start_team(
        empty_database_url("postgresql"), empty_database_url("postgresql"), tmp_path / "team"
    )
    try:
        for name, value in team.user_env().items():
            monkeypatch.setenv(name, value)
        yield Mode("team", team)
    finally:
        team.stop()


@pytest.fixture
def rm_workspace(mode: Mode) -> Iterator[Workspace]:
    ws = mode.open()
    yield ws
    ws.close()


@pytest.fixture(scope="module")
def _module_team(
    tmp_path_factory: pytest.TempPathFactory, _servers: dict[str, Any]
) -> Iterator[Team]:
    """One team for a module's team-mode tests, each on a new PostgreSQL database."""
    server = _server(_servers, "postgresql")
    rm_url, server_url = (server.create().render_as_string(hide_password=False) for _ in "ab")
    team = start_team(rm_url, server_url, tmp_path_factory.mktemp("team"))
    try:
        yield team
    finally:
        team.stop()


@pytest.fixture(params=MODES)
def shared_mode(
    request: pytest.FixtureRequest, wharf_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Mode:
    """As ``mode``, but a team-mode test uses the module's team (started on first use)."""
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    if request.param == "embedded":
        return Mode("embedded")
    team: Team = request.getfixturevalue("_module_team")
    for name, value in team.user_env().items():
        monkeypatch.setenv(name, value)
    return Mode("team", team)


@pytest.fixture
def mode_workspace(shared_mode: Mode) -> Iterator[Workspace]:
    ws = shared_mode.open()
    yield ws
    ws.close()


def steps(workspace: Workspace, run_id) -> list:
    return workspace.store.steps.list(StepRunFilter(run_id=run_id), ASC).items


def assert_no_holder_stretch(workspace: Workspace) -> None:
    """Every step that held an allocation left its holder's stretch (see HoldersFirst), however
    it ended: a leaked stretch would hold back every later creation in the process."""
    assert workspace.step_resources is not None
    assert workspace.step_resources.holders.holding_now == 0
