"""Engines and URLs: driver mapping, masking, SQLite locking discipline, unreachable servers."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from wharf.core.errors import InputError, StoreError, StoreUnavailableError
from wharf.sql import engine as engine_module
from wharf.sql.engine import mask_url, normalize_url
from wharf.store.sql import SqlStore


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:////tmp/w.db", "sqlite:////tmp/w.db"),
        ("postgresql://u:p@h/db", "postgresql+psycopg://u:p@h/db"),
        ("postgres://u@h:5433/db", "postgresql+psycopg://u@h:5433/db"),
        ("postgresql+psycopg2://u@h/db", "postgresql+psycopg2://u@h/db"),
        ("mysql://u@h/db", "mysql+pymysql://u@h/db?charset=utf8mb4"),
        ("mariadb://u@h/db", "mysql+pymysql://u@h/db?charset=utf8mb4"),
        ("mysql+pymysql://u@h/db?charset=latin1", "mysql+pymysql://u@h/db?charset=latin1"),
    ],
)
def test_normalize_url(url: str, expected: str) -> None:
    assert normalize_url(url).render_as_string(hide_password=False) == expected


def test_bad_urls() -> None:
    with pytest.raises(InputError, match="Unsupported store URL scheme 'oracle'"):
        normalize_url("oracle://u@h/db")
    with pytest.raises(InputError, match="Invalid store URL"):
        normalize_url("not a url")
    with pytest.raises(InputError, match="in-memory SQLite"):
        SqlStore.open("sqlite://")
    with pytest.raises(InputError, match="in-memory SQLite"):
        SqlStore.open("sqlite:///:memory:")


def test_password_is_masked() -> None:
    assert mask_url("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert mask_url("postgresql://u@h/db?password=secret") == "postgresql://u@h/db?password=***"
    assert mask_url("mysql://u@h/db?passwd=secret") == "mysql://u@h/db?passwd=***"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("u:S3cret@host/db", "u:***@host/db"),
        ("postgresql://wharf:S3cret@db:notaport/wharf", "postgresql://wharf:***@db:notaport/wharf"),
        (
            "postgresql://wharf:S3c@ret@127.0.0.1:5432/wharf",
            "postgresql://wharf:***@127.0.0.1:5432/wharf",
        ),
        ("mysql://root:S3c@ret@127.0.0.1/wharf", "mysql://root:***@127.0.0.1/wharf"),
    ],
)
def test_an_unparsable_url_is_refused_without_its_password(url: str, shown: str) -> None:
    with pytest.raises(InputError) as refused:
        normalize_url(url)
    assert str(refused.value).startswith(f"Invalid store URL '{shown}': ")
    assert "S3c" not in str(refused.value) and "ret@" not in str(refused.value)


def test_sqlite_refuses_a_missing_directory_and_creates_none(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "wharf.db"
    with pytest.raises(InputError, match=f"the directory {tmp_path / 'a' / 'b'} does not exist"):
        SqlStore.open(f"sqlite:///{path}")
    assert not (tmp_path / "a").exists()


def test_sqlite_configures_connections(tmp_path: Path) -> None:
    path = tmp_path / "wharf.db"
    with SqlStore.open(f"sqlite:///{path}") as store:
        assert path.exists() and store.url == f"sqlite:///{path}" and store.dialect == "sqlite"
        with store._db.engine.connect() as conn:
            pragma = {
                name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
                for name in ("journal_mode", "foreign_keys", "synchronous", "busy_timeout")
            }
    assert pragma == {
        "journal_mode": "wal",
        "foreign_keys": 1,
        "synchronous": 1,  # NORMAL
        "busy_timeout": 30_000,
    }


def test_sqlite_write_transactions_take_the_write_lock_first(sqlite_store: SqlStore) -> None:
    path = sqlite_store.url.removeprefix("sqlite:///")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)

    def try_to_write() -> str:
        try:
            other.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            return str(exc)
        other.execute("ROLLBACK")
        return "acquired"

    # A write transaction holds the lock from its first statement (even a read) ...
    assert sqlite_store._db.write(lambda conn: try_to_write()) == "database is locked"
    # ... a read transaction does not block writers.
    assert sqlite_store._db.read(lambda conn: try_to_write()) == "acquired"
    other.close()


def test_a_sqlite_writer_tries_for_the_lock_until_it_is_free_then_has_its_full_timeout(
    tmp_path: Path,
) -> None:
    path = tmp_path / "contended.db"
    store = SqlStore.open(f"sqlite:///{path}")
    tries: list[str] = []
    tried = threading.Condition()

    def trace(statement: str) -> None:
        if statement == "BEGIN IMMEDIATE":
            with tried:
                tries.append(statement)
                tried.notify_all()

    sa.event.listen(store._db.engine, "connect", lambda dbapi, _: dbapi.set_trace_callback(trace))
    store._db.engine.dispose()  # new connections, traced
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    writer = threading.Thread(target=store.users.create, args=("waited",))
    writer.start()
    with tried:  # it tried, and tried again after its short wait in SQLite's busy handler
        assert tried.wait_for(lambda: len(tries) >= 3, timeout=10)
    holder.execute("ROLLBACK")
    writer.join(timeout=10)
    assert store.users.get_by_name("waited").name == "waited"
    with store._db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
    holder.close()
    store.close()


def test_beginning_a_write_fails_at_once_on_an_error_other_than_a_lock(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "plain.db", isolation_level=None)
    connection.execute("BEGIN")
    with pytest.raises(sqlite3.OperationalError, match="within a transaction"):
        engine_module._begin_immediate(connection)
    assert connection.execute("PRAGMA busy_timeout").fetchone() == (30_000,)
    connection.close()


def test_sqlite_lock_timeout_is_a_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_SECONDS", 0.05)
    path = tmp_path / "locked.db"
    store = SqlStore.open(f"sqlite:///{path}")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="stayed locked by another writer"):
            store.users.create("blocked")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.users.create("free").name == "free"
    store.close()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres:secret@127.0.0.1:1/wharf",
        "mysql://root:secret@127.0.0.1:1/wharf",
        "postgresql://postgres@127.0.0.1:1/wharf?password=secret",
        "mysql://root@127.0.0.1:1/wharf?passwd=secret",
    ],
)
def test_unreachable_server_fails_fast_with_one_line(url: str) -> None:
    start = time.monotonic()
    with pytest.raises(StoreUnavailableError) as info:
        SqlStore.open(url)
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert message.startswith(f"Cannot connect to the metadata store at {mask_url(url)}: ")
    assert "secret" not in message and "\n" not in message
    assert not isinstance(info.value, sa.exc.SQLAlchemyError)


def test_a_database_error_never_shows_the_statements_values(tmp_path: Path) -> None:
    engine = engine_module.create_sql_engine(f"sqlite:///{tmp_path / 'w.db'}")
    try:
        with engine.begin() as connection:
            connection.execute(sa.text("CREATE TABLE t (k TEXT PRIMARY KEY)"))
            connection.execute(sa.text("INSERT INTO t VALUES (:k)"), {"k": "hash-of-a-secret"})
        with pytest.raises(sa.exc.IntegrityError) as raised, engine.begin() as connection:
            connection.execute(sa.text("INSERT INTO t VALUES (:k)"), {"k": "hash-of-a-secret"})
        assert "hash-of-a-secret" not in str(raised.value)
        assert "hidden due to hide_parameters" in str(raised.value)
    finally:
        engine.dispose()
