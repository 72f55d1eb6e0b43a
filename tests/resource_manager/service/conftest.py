"""Resource Manager service fixtures: a fresh, migrated RM database per backend.

- ``rm_url``: URL of an empty, migrated RM database on the parametrised backend (``backend_name``
  from the root conftest: sqlite / postgresql / mariadb). SQLite: a copy of a migrated template
  file per test. Servers: one database per pytest process (per xdist worker), migrated once and
  wiped after every test (stock descriptors and the state row are restored).
- ``rm``: a :class:`ResourceManagerService` on ``rm_url`` driven by the ``clock`` fixture.
- ``open_rm``: ``(**options) -> service``, more services (other "processes") on the same database.

A server that cannot be reached skips (or fails, with ``CI=true``), as in the root conftest.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.conftest import FakeClock, ServerDatabases, _server
from wharf.resource_manager.service import ResourceManagerService, ServiceOptions
from wharf.resource_manager.service import tables as t


@pytest.fixture(scope="session")
def _rm_sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rm-template") / "rm.db"
    ResourceManagerService.open(f"sqlite:///{path}").close()
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    return path


@dataclass
class _RmDatabase:
    url: str
    wipe_engine: sa.Engine


@pytest.fixture(scope="session")
def _rm_databases() -> Iterator[dict[str, _RmDatabase]]:
    created: dict[str, _RmDatabase] = {}
    yield created
    for db in created.values():
        db.wipe_engine.dispose()


def wipe_rm(engine: sa.Engine) -> None:
    """Delete every RM row except the stock descriptors, and reset the state row."""
    with engine.begin() as conn:
        for table in reversed(t.metadata.sorted_tables):
            if table is t.state:
                continue
            if table is t.descriptors:
                conn.execute(table.delete().where(table.c.stock.is_(False)))
            else:
                conn.execute(table.delete())
        conn.execute(
            sa.update(t.state).values(
                state_version=0,
                config_version=0,
                leader_id=None,
                leader_epoch=0,
                last_cycle_at=None,
                last_sweep_at=None,
            )
        )


@pytest.fixture
def rm_url(
    request: pytest.FixtureRequest,
    backend_name: str,
    tmp_path: Path,
    _rm_sqlite_template: Path,
    _rm_databases: dict[str, _RmDatabase],
) -> Iterator[str]:
    if backend_name == "sqlite":
        path = tmp_path / f"rm-{uuid.uuid4().hex[:8]}.db"
        shutil.copyfile(_rm_sqlite_template, path)
        yield f"sqlite:///{path}"
        return
    if backend_name not in _rm_databases:
        servers = request.getfixturevalue("_servers")
        server: ServerDatabases = _server(servers, backend_name)
        url = server.create().render_as_string(hide_password=False)
        ResourceManagerService.open(url).close()
        _rm_databases[backend_name] = _RmDatabase(url, sa.create_engine(url, poolclass=sa.NullPool))
    database = _rm_databases[backend_name]
    try:
        yield database.url
    finally:
        wipe_rm(database.wipe_engine)


@pytest.fixture
def open_rm(rm_url: str, clock: FakeClock) -> Iterator[Callable[..., ResourceManagerService]]:
    services: list[ResourceManagerService] = []

    def make(**options: Any) -> ResourceManagerService:
        service = ResourceManagerService.open(
            rm_url, clock=clock, options=ServiceOptions(**options)
        )
        services.append(service)
        return service

    yield make
    for service in services:
        service.close()


@pytest.fixture
def rm(open_rm: Callable[..., ResourceManagerService]) -> ResourceManagerService:
    return open_rm()
