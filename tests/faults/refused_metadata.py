"""A database trigger for fault tests: the database itself refuses to insert run metadata of one
key, so the write after a run's own insert fails inside the real database (SQLite, PostgreSQL or
MariaDB), with nothing of Wharf's code replaced.

:func:`refusing_metadata_key` installs the trigger for the duration of a ``with`` block and drops
it afterwards (the server databases are shared between tests).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

TRIGGER = "wharf_test_refuse_metadata"
MESSAGE = "injected failure: run metadata refused"


def _create_statements(dialect: str, key: str) -> list[str]:
    if dialect == "sqlite":
        return [
            f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON run_metadata "
            f"WHEN NEW.key = '{key}' BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END"
        ]
    if dialect == "postgresql":
        return [
            f"CREATE FUNCTION {TRIGGER}() RETURNS trigger AS $$ BEGIN "
            f"IF NEW.key = '{key}' THEN RAISE EXCEPTION '{MESSAGE}'; END IF; "
            "RETURN NEW; END $$ LANGUAGE plpgsql",
            f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON run_metadata "
            f"FOR EACH ROW EXECUTE FUNCTION {TRIGGER}()",
        ]
    return [  # MySQL / MariaDB
        f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON run_metadata FOR EACH ROW BEGIN "
        f"IF NEW.`key` = '{key}' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{MESSAGE}'; "
        "END IF; END"
    ]


def _drop_statements(dialect: str) -> list[str]:
    if dialect == "postgresql":
        return [
            f"DROP TRIGGER IF EXISTS {TRIGGER} ON run_metadata",
            f"DROP FUNCTION IF EXISTS {TRIGGER}()",
        ]
    return [f"DROP TRIGGER IF EXISTS {TRIGGER}"]


def _execute(engine: sa.Engine, statements: list[str]) -> None:
    with engine.begin() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement)


@contextmanager
def refusing_metadata_key(engine: sa.Engine, key: str) -> Iterator[None]:
    """While the block runs, every insert of a run metadata row with ``key`` fails in the
    database (and with it the transaction that makes it)."""
    dialect = engine.dialect.name
    _execute(engine, _create_statements(dialect, key))
    try:
        yield
    finally:
        _execute(engine, _drop_statements(dialect))
