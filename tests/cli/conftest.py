"""Fixtures shared by the CLI tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh embedded Wharf home (``WHARF_HOME``), with no store, server or Resource Manager
    set by the environment; a test module may define its own."""
    home = tmp_path / "home"
    monkeypatch.setenv("WHARF_HOME", str(home))
    for name in ("WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_RM_URL", "WHARF_RM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def logs_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A fresh embedded workspace in ``tmp_path`` (also the working directory), whose runs the
    ``wharf`` commands of the test read."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    ws = Workspace.open(load_config())
    yield ws
    ws.close()
