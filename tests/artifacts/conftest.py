"""Fixtures shared by the artifact tests: a fresh local store and a fresh default registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from wharf.artifacts import LocalArtifactStore, MaterializerRegistry, default_registry


@pytest.fixture
def store(tmp_path: Path) -> LocalArtifactStore:
    return LocalArtifactStore(tmp_path / "store")


@pytest.fixture
def registry() -> MaterializerRegistry:
    return default_registry()
