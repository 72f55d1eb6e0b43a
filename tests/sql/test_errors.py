"""Driver exceptions are classified and converted at the boundary, never leaked."""

from __future__ import annotations

import psycopg.errors
import pymysql.err
import pytest
from sqlalchemy import Connection
from sqlalchemy import exc as sa_exc

from wharf.core.errors import EntityExistsError, EntityNotFoundError, InputError, StoreError
from wharf.sql.errors import (
    IntegrityKind,
    RetryableConflictError,
    convert,
    integrity_kind,
    is_retryable,
)
from wharf.store.sql import SqlStore


def wrap(cls: type[sa_exc.DBAPIError], orig: Exception) -> sa_exc.DBAPIError:
    return cls("SELECT 1", {}, orig)


@pytest.mark.parametrize(
    ("orig", "kind"),
    [
        (psycopg.errors.UniqueViolation("dup"), IntegrityKind.UNIQUE),
        (psycopg.errors.ForeignKeyViolation("fk"), IntegrityKind.FOREIGN_KEY),
        (psycopg.errors.NotNullViolation("null"), IntegrityKind.OTHER),
        (pymysql.err.IntegrityError(1062, "Duplicate entry"), IntegrityKind.UNIQUE),
        (pymysql.err.IntegrityError(1452, "Cannot add a child row"), IntegrityKind.FOREIGN_KEY),
    ],
)
def test_integrity_classification(orig: Exception, kind: IntegrityKind) -> None:
    error = wrap(sa_exc.IntegrityError, orig)
    assert isinstance(error, sa_exc.IntegrityError)
    assert integrity_kind(error) is kind
    converted = convert(error, "db://x")
    expected = {
        IntegrityKind.UNIQUE: EntityExistsError,
        IntegrityKind.FOREIGN_KEY: EntityNotFoundError,
        IntegrityKind.OTHER: InputError,
    }[kind]
    assert isinstance(converted, expected)


@pytest.mark.parametrize(
    "orig",
    [
        psycopg.errors.DeadlockDetected("deadlock"),
        psycopg.errors.SerializationFailure("serialize"),
        pymysql.err.OperationalError(1213, "Deadlock found when trying to get lock"),
    ],
)
def test_deadlocks_are_retryable(orig: Exception) -> None:
    error = wrap(sa_exc.OperationalError, orig)
    assert is_retryable(error)
    assert isinstance(convert(error, "db://x"), RetryableConflictError)


def test_other_errors_become_one_line_store_errors() -> None:
    error = wrap(sa_exc.ProgrammingError, pymysql.err.ProgrammingError(1064, "bad\nsyntax"))
    converted = convert(error, "mysql://u:***@h/db")
    assert type(converted) is StoreError
    assert str(converted) == "Metadata store error at mysql://u:***@h/db: bad syntax (error 1064)"


def test_write_retries_a_transaction_that_hit_a_deadlock(sqlite_store: SqlStore) -> None:
    attempts: list[int] = []

    def flaky(conn: Connection) -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise wrap(sa_exc.OperationalError, pymysql.err.OperationalError(1213, "Deadlock"))
        return "done"

    assert sqlite_store._db.write(flaky) == "done"
    assert len(attempts) == 3
