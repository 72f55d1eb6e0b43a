"""Fixtures of the SDK tests: an embedded workspace in a fresh Wharf home."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace.open(load_config({}, home=tmp_path / "home"))
    yield ws
    ws.close()
