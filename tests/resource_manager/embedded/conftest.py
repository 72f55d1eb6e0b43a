"""In-process client fixtures: a migrated SQLite RM per test, the fake clock, two principals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FakeClock
from wharf.resource_manager.embedded.inprocess import InProcessResourceManager
from wharf.resource_manager.service import Principal

LOCAL_USER = Principal("local-user", admin=True)


@pytest.fixture
def client(tmp_path: Path, clock: FakeClock) -> Iterator[InProcessResourceManager]:
    client = InProcessResourceManager.open(
        f"sqlite:///{tmp_path / 'rm.db'}", LOCAL_USER, clock=clock
    )
    yield client
    client.close()
