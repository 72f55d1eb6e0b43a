"""Shared fixtures: a fake clock and metadata stores on SQLite, PostgreSQL and MariaDB.

For other packages' tests:

- ``sqlite_store``: a fresh, migrated ``SqlStore`` in ``tmp_path`` (real clock). Its ``url`` is a
  plain ``sqlite:///...`` URL that subprocesses can open too.
- ``sqlite_store_factory(clock=None)``: more stores, each in its own fresh file.
- ``clock``: a :class:`FakeClock`; pass it as ``SqlStore.open(..., clock=clock)``.

For contract suites:

- ``backend``: a fresh, migrated ``SqlStore`` on each of sqlite / postgresql / mariadb (param ids),
  built with the ``clock`` fixture. Use it as ``def test_x(backend: SqlStore)``.
- ``backend_name``: the current param ("sqlite", "postgresql", "mariadb").
- ``empty_database_url``: ``(backend_name) -> URL`` of a brand-new, empty database (dropped at the
  end of the session), for migration tests.

Server databases: each pytest process (each xdist worker) creates its own database
``wharf_t_<hex>`` on PostgreSQL (``WHARF_TEST_POSTGRES_URL``, default
``postgresql://postgres@127.0.0.1:5432/test``) and MariaDB (``WHARF_TEST_MARIADB_URL``, default
``mariadb://root@127.0.0.1:3306/test``), migrates it once, wipes all rows after every test and
drops it at the end. A server that cannot be reached skips its params with the reason, unless
``CI=true``, where it fails the run.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from wharf.sql.engine import normalize_url
from wharf.store.sql import SqlStore
from wharf.store.sql.tables import metadata

SERVER_URLS = {
    "postgresql": os.environ.get(
        "WHARF_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
    ),
    "mariadb": os.environ.get("WHARF_TEST_MARIADB_URL", "mariadb://root@127.0.0.1:3306/test"),
}
BACKENDS = ("sqlite", "postgresql", "mariadb")


class FakeClock:
    """A controllable clock: every read returns a strictly later instant (by ``tick``).

    ``now`` is the last instant handed out; ``advance`` jumps ahead.
    """

    def __init__(
        self,
        start: datetime = datetime(2024, 1, 1, 12, 0, tzinfo=UTC),
        tick: timedelta = timedelta(milliseconds=1),
    ) -> None:
        self.now = start
        self.tick = tick

    def __call__(self) -> datetime:
        self.now = self.now + self.tick
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now = self.now + timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# ----------------------------------------------------------------------------- SQLite


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, copied for each test instead of migrating again."""
    path = tmp_path_factory.mktemp("wharf-template") / "template.db"
    SqlStore.open(f"sqlite:///{path}").close()  # close() checkpoints the WAL into the file
    return path


@pytest.fixture
def sqlite_store_factory(
    tmp_path: Path, _sqlite_template: Path
) -> Iterator[Callable[..., SqlStore]]:
    stores: list[SqlStore] = []

    def make(clock: Callable[[], datetime] | None = None) -> SqlStore:
        path = tmp_path / f"wharf-{uuid.uuid4().hex[:8]}.db"
        shutil.copyfile(_sqlite_template, path)
        store = SqlStore.open(f"sqlite:///{path}", clock=clock)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def sqlite_store(sqlite_store_factory: Callable[..., SqlStore]) -> SqlStore:
    return sqlite_store_factory()


# ----------------------------------------------------------------------------- servers


@dataclass
class ServerDatabases:
    """Creates throw-away databases on one server and drops them all at the end."""

    name: str
    admin_url: sa.URL
    created: list[str] = field(default_factory=list)

    def admin_engine(self) -> sa.Engine:
        return sa.create_engine(self.admin_url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)

    def create(self) -> sa.URL:
        db_name = f"wharf_t_{uuid.uuid4().hex[:12]}"
        engine = self.admin_engine()
        try:
            with engine.connect() as conn:
                if self.name == "postgresql":
                    conn.exec_driver_sql(f'CREATE DATABASE "{db_name}"')
                else:
                    conn.exec_driver_sql(
                        f"CREATE DATABASE `{db_name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
                    )
        finally:
            engine.dispose()
        self.created.append(db_name)
        return self.admin_url.set(database=db_name)

    def drop_all(self) -> None:
        engine = self.admin_engine()
        try:
            with engine.connect() as conn:
                for db_name in self.created:
                    if self.name == "postgresql":
                        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
                    else:
                        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{db_name}`")
        finally:
            engine.dispose()


def _unreachable(name: str, url: sa.URL, error: Exception) -> None:
    reason = (
        f"{name} at {url.render_as_string(hide_password=True)} is not reachable: "
        f"{str(error).splitlines()[0]}"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: every backend must run)", pytrace=False)
    pytest.skip(f"{reason}; set CI=true to make this an error")


@pytest.fixture(scope="session")
def _servers() -> Iterator[dict[str, ServerDatabases | Exception]]:
    """Per backend: its database factory, or the error that made it unreachable."""
    servers: dict[str, ServerDatabases | Exception] = {}
    for name, url in SERVER_URLS.items():
        admin_url = normalize_url(url).update_query_dict({"connect_timeout": "3"})
        engine = sa.create_engine(admin_url, poolclass=sa.NullPool)
        try:
            with engine.connect():
                pass
            servers[name] = ServerDatabases(name, admin_url)
        except Exception as exc:  # any driver error means "unreachable"
            servers[name] = exc
        finally:
            engine.dispose()
    yield servers
    for server in servers.values():
        if isinstance(server, ServerDatabases):
            server.drop_all()


def _server(servers: dict[str, ServerDatabases | Exception], name: str) -> ServerDatabases:
    server = servers[name]
    if isinstance(server, Exception):
        _unreachable(name, normalize_url(SERVER_URLS[name]), server)
        raise AssertionError("unreachable")  # pragma: no cover - skip/fail raise
    return server


@dataclass
class _SharedDatabase:
    url: sa.URL
    wipe_engine: sa.Engine


@pytest.fixture(scope="session")
def _shared_databases(
    _servers: dict[str, ServerDatabases | Exception],
) -> Iterator[dict[str, _SharedDatabase]]:
    """One migrated database per server for this process, created on first use."""
    shared: dict[str, _SharedDatabase] = {}
    yield shared
    for db in shared.values():
        db.wipe_engine.dispose()


def _shared_database(
    name: str,
    servers: dict[str, ServerDatabases | Exception],
    shared: dict[str, _SharedDatabase],
) -> _SharedDatabase:
    if name not in shared:
        url = _server(servers, name).create()
        SqlStore.open(url.render_as_string(hide_password=False)).close()
        shared[name] = _SharedDatabase(url, sa.create_engine(url, poolclass=sa.NullPool))
    return shared[name]


def wipe(engine: sa.Engine) -> None:
    """Delete every row of every Wharf table (children first), keeping the schema."""
    with engine.begin() as conn:
        if conn.dialect.name in ("mysql", "mariadb"):
            # InnoDB checks foreign keys row by row, which trips over step_run's self-reference.
            conn.exec_driver_sql("SET FOREIGN_KEY_CHECKS = 0")
        for table in reversed(metadata.sorted_tables):
            conn.execute(table.delete())
        if conn.dialect.name in ("mysql", "mariadb"):
            conn.exec_driver_sql("SET FOREIGN_KEY_CHECKS = 1")


# ----------------------------------------------------------------------------- backends


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def backend(
    request: pytest.FixtureRequest,
    backend_name: str,
    clock: FakeClock,
    sqlite_store_factory: Callable[..., SqlStore],
) -> Iterator[SqlStore]:
    """A fresh, migrated, empty store on the parametrised backend, using ``clock``."""
    if backend_name == "sqlite":
        yield sqlite_store_factory(clock=clock)
        return
    servers = request.getfixturevalue("_servers")
    shared = request.getfixturevalue("_shared_databases")
    database = _shared_database(backend_name, servers, shared)
    store = SqlStore.open(database.url.render_as_string(hide_password=False), clock=clock)
    try:
        yield store
    finally:
        store.close()
        wipe(database.wipe_engine)


@pytest.fixture
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], str]:
    """``(backend_name) -> URL`` of a new, empty database, dropped at the end of the session."""

    def make(name: str) -> str:
        if name == "sqlite":
            return f"sqlite:///{tmp_path / f'empty-{uuid.uuid4().hex[:8]}.db'}"
        servers = request.getfixturevalue("_servers")
        return _server(servers, name).create().render_as_string(hide_password=False)

    return make
