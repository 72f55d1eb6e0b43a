"""Fixtures of the engine's tests: ``world``, a fresh SQLite store (a file in the test's
temporary directory) with a project, pipeline and snapshot to record runs and steps against
(``tests.store.conftest.World``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.conftest import World, sqlite_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with sqlite_world(tmp_path) as world:
        yield world
