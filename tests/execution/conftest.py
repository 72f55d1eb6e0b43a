"""Fixtures of the engine's tests: ``world``, a fresh SQLite store (a file in the test's
temporary directory) with a project, pipeline and snapshot to record runs and steps against
(``tests.store.conftest.World``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.conftest import World, make_world
from wharf.store.sql import SqlStore


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    store = SqlStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        yield make_world(store)
    finally:
        store.close()
