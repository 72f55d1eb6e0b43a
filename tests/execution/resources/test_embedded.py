"""The embedded adapter of the step-resources port (:mod:`wharf.execution.resources.embedded`):
what :func:`connect_configured` gives a workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from wharf.config.global_config import load_config
from wharf.execution.resources.embedded import EmbeddedStepResources
from wharf.sdk.workspace import Workspace


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path))
    for var in ("WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_RESOURCE_MANAGER"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def test_workspaces_sharing_a_store_wait_in_the_room_its_releases_wake(home: Path) -> None:
    first = Workspace.open(load_config())
    try:
        second = Workspace.open(load_config(), first.store)
        one, two = first.step_resources, second.step_resources
        assert isinstance(one, EmbeddedStepResources) and isinstance(two, EmbeddedStepResources)
        assert two.requests is one.requests and two.room is one.room
        assert first.store.resource_requests is one.requests  # the client the store's steps use
    finally:
        first.close()


def test_no_resource_manager_means_no_port(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WHARF_RESOURCE_MANAGER", "none")
    workspace = Workspace.open(load_config())
    try:
        assert workspace.step_resources is None
        assert workspace.run_services(object()).resources is None
    finally:
        workspace.close()
