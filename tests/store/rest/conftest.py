"""The store contract suite over REST: ``backend`` is a ``RestStore`` talking to a real uvicorn
server (one per test process, in a thread) whose store is a fresh SQLite file or the shared
PostgreSQL (or MariaDB) database, built with the test's fake ``clock``.

The REST backend also carries the server store's ``_db`` and ``dialect``, so the few contract
tests that inspect the database directly (locks, SQL NULLs) run unchanged.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FakeClock, _shared_database, wipe
from tests.server.live import LiveServer, admin_key, open_state, start_server
from wharf.store.rest import RestStore

REST_BACKENDS = tuple(
    f"rest-{name}"
    for name in os.environ.get("WHARF_TEST_REST_BACKENDS", "sqlite,postgresql").split(",")
)
"""Databases behind the server (``WHARF_TEST_REST_BACKENDS=sqlite,postgresql,mariadb`` adds
MariaDB; the default keeps the suite short)."""


class RestBackend(RestStore):
    """A RestStore plus a handle on the server's database, for tests only."""

    _db: Any
    dialect: str


@pytest.fixture(scope="session")
def live_server() -> Iterator[LiveServer]:
    server = start_server()
    yield server
    server.stop()


@pytest.fixture(params=REST_BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def backend(
    request: pytest.FixtureRequest,
    backend_name: str,
    clock: FakeClock,
    live_server: LiveServer,
    tmp_path: Path,
    _sqlite_template: Path,
) -> Iterator[RestBackend]:
    database = None
    if backend_name == "rest-sqlite":
        path = tmp_path / f"rest-{uuid.uuid4().hex[:8]}.db"
        shutil.copyfile(_sqlite_template, path)
        url = f"sqlite:///{path}"
    else:
        servers = request.getfixturevalue("_servers")
        shared = request.getfixturevalue("_shared_databases")
        database = _shared_database(backend_name.removeprefix("rest-"), servers, shared)
        url = database.url.render_as_string(hide_password=False)
    state, stores = open_state(url, clock=clock)
    key = admin_key(state)
    live_server.use(state)
    store = RestBackend(live_server.url, key)
    store._db = stores.db
    store.dialect = stores.store.dialect
    try:
        yield store
    finally:
        store.close()
        stores.close()
        if database is not None:
            wipe(database.wipe_engine)
