"""The embedded adapter of the step-resources port (:mod:`wharf.execution.resources.embedded`):
what :func:`connect_configured` gives a workspace."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from wharf.config.global_config import load_config
from wharf.core.errors import IllegalOperationError
from wharf.execution.resources.embedded import EmbeddedStepResources
from wharf.sdk.client import Client
from wharf.sdk.workspace import Workspace


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path))
    for var in ("WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_RESOURCE_MANAGER"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def test_the_workspace_links_the_requests_its_port_makes_not_its_store(home: Path) -> None:
    """The store only stores: the workspace keeps the requests link, the RM client its
    port's requests go through, and closes it."""
    workspace = Workspace.open(load_config())
    try:
        port = workspace.step_resources
        assert isinstance(port, EmbeddedStepResources)
        assert workspace.requests is port.requests
        assert not hasattr(workspace.store, "resource_requests")
        assert workspace.resource_manager() is port.requests.resource_manager
    finally:
        workspace.close()


def test_no_resource_manager_means_no_port(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WHARF_RESOURCE_MANAGER", "none")
    workspace = Workspace.open(load_config())
    try:
        assert workspace.step_resources is None and workspace.requests is None
        assert workspace.run_services(object()).resources is None
    finally:
        workspace.close()


def test_a_client_without_a_resource_manager_says_so(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_RESOURCE_MANAGER", "none")
    with Client(load_config()) as client:
        with pytest.raises(IllegalOperationError, match="no Resource Manager"):
            client.get_resource_request(uuid.uuid4())
        with pytest.raises(IllegalOperationError, match="no Resource Manager"):
            client.list_resource_requests()
