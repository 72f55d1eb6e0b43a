"""Shared by the ``wharf component ...`` / ``wharf stack ...`` CLI tests: the command runners,
their own ``home`` fixture (working directory ``tmp_path``, no store URL, artifact root or active
stack from the environment), the ``prod`` stack fixture, and in-process reads of the stored
components and stacks for checks that only need the state (each ``wharf`` process costs CPU; the
listing commands' own output is checked in ``test_stacks.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace


def wharf(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
        timeout=60,
    )


def ok(*args: str, env: dict[str, str] | None = None) -> str:
    result = wharf(*args, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def as_json(*args: str, env: dict[str, str] | None = None) -> Any:
    return json.loads(ok(*args, "-o", "json", env=env))


def assert_one_line_error(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0], lines[0]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WHARF_HOME", str(home))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def prod(home: Path, tmp_path: Path) -> Path:
    """Components ``orch`` and ``store`` (at the returned path) and the stack ``prod``.

    Registered in-process (fast); ``test_stacks.py`` registers components and stacks through the
    CLI.
    """
    path = tmp_path / "prod-artifacts"
    with open_workspace() as workspace:
        stacks.register_component(workspace, "orch", ComponentType.ORCHESTRATOR, "local")
        stacks.register_component(
            workspace, "store", ComponentType.ARTIFACT_STORE, "local", {"path": str(path)}
        )
        stacks.register_stack(workspace, "prod", orchestrator="orch", artifact_store="store")
    return path


def run_all(*calls: tuple[str, ...]) -> list[subprocess.CompletedProcess[str]]:
    """Independent ``wharf`` calls, run concurrently to keep the suite fast."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda args: wharf(*args), calls))


@contextmanager
def open_workspace() -> Iterator[Workspace]:
    """The workspace of the current environment (the ``home`` fixture's), opened in-process."""
    workspace = Workspace.open(load_config())
    try:
        yield workspace
    finally:
        workspace.close()


def snapshot() -> tuple[Any, Any]:
    """Every stored component and stack (with which is active), read in-process."""
    with open_workspace() as workspace:
        components = stacks.list_components(workspace).items
        described = stacks.list_stacks(workspace).items
        return (
            [c.model_dump(mode="json") for c in components],
            [s.model_dump(mode="json") for s in described],
        )


def configuration(type: str, name: str) -> Any:
    """The stored configuration of component ``name`` of ``type``, read in-process."""
    with open_workspace() as workspace:
        component_type = stacks.parse_component_type(type)
        return stacks.find_component(workspace, component_type, name).configuration
