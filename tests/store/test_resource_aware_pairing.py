"""Pairing a store with the Resource Manager keeps the store's combined step calls (the engine
uses them when offered: one store call instead of two per step)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace
from wharf.store.ports import StepRunBatchOperations
from wharf.store.resource_aware import ResourceAwareStepRuns


def test_embedded_pairing_keeps_the_combined_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path))
    for var in ("WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_RESOURCE_MANAGER"):
        monkeypatch.delenv(var, raising=False)
    workspace = Workspace.open(load_config())
    try:
        assert isinstance(workspace.store.steps, ResourceAwareStepRuns)
        assert isinstance(workspace.store.steps, StepRunBatchOperations)
    finally:
        workspace.close()
