# ruff: noqa: F811  (fixtures imported from the service conftest)
"""HTTP API fixtures: a real uvicorn server per test over a fresh RM database.

- ``server``: the RM API on a migrated SQLite copy, its service driven by the ``clock`` fixture
  (tokens use real time); see :mod:`.live` for the principals and their credentials;
- ``admin``, ``alice``, ``bob``: :class:`HttpResourceManager` clients logged in as them;
- ``http``: a plain ``httpx.Client`` on the server, for raw requests; ``token(key)`` logs in.

The service conftest's per-backend ``rm_url`` is re-exported for tests that run on every backend.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import FakeClock
from tests.resource_manager.api.live import ADMIN_KEY, ALICE_KEY, BOB_KEY, LiveServer, start_rm
from tests.resource_manager.service.conftest import (  # noqa: F401 (fixtures)
    _rm_databases,
    _rm_sqlite_template,
    rm_url,
)
from wharf.resource_manager.client.http import HttpResourceManager


@pytest.fixture
def sqlite_rm_url(tmp_path: Path, _rm_sqlite_template: Path) -> str:
    path = tmp_path / "rm.db"
    shutil.copyfile(_rm_sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def server(sqlite_rm_url: str, clock: FakeClock) -> Iterator[LiveServer]:
    live = start_rm(sqlite_rm_url, clock=clock)
    yield live
    live.stop()


@pytest.fixture
def make_client(server: LiveServer) -> Iterator[Callable[[str], HttpResourceManager]]:
    clients: list[HttpResourceManager] = []

    def make(api_key: str) -> HttpResourceManager:
        client = server.client(api_key)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def admin(make_client: Callable[[str], HttpResourceManager]) -> HttpResourceManager:
    return make_client(ADMIN_KEY)


@pytest.fixture
def alice(make_client: Callable[[str], HttpResourceManager]) -> HttpResourceManager:
    return make_client(ALICE_KEY)


@pytest.fixture
def bob(make_client: Callable[[str], HttpResourceManager]) -> HttpResourceManager:
    return make_client(BOB_KEY)


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.fixture
def token(http: httpx.Client) -> Callable[[str], dict[str, str]]:
    """``token(api_key)`` -> the Authorization header of a fresh login."""

    def login(api_key: str = ADMIN_KEY) -> dict[str, str]:
        response = http.post("/v1/auth/login", json={"api_key": api_key})
        assert response.status_code == 200, response.text
        return {"Authorization": f"Bearer {response.json()['access_token']}"}

    return login
