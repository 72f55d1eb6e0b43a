"""Fixtures shared by the artifact tests: a fresh local store, a fresh default registry, and a
real S3 server (one per session) with a fresh bucket per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.artifacts.s3_server import s3_bucket, s3_server
from wharf.artifacts import LocalArtifactStore, MaterializerRegistry, default_registry

__all__ = ["s3_bucket", "s3_server"]  # the S3 fixtures, for every artifact test


@pytest.fixture
def store(tmp_path: Path) -> LocalArtifactStore:
    return LocalArtifactStore(tmp_path / "store")


@pytest.fixture
def registry() -> MaterializerRegistry:
    return default_registry()
