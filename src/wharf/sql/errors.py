"""Conversion of SQLAlchemy/driver exceptions into Wharf's error hierarchy (:func:`convert`).

Invariants: this is the only module that looks inside driver exceptions (SQLite error names,
PostgreSQL SQLSTATEs, MySQL error numbers); every ``SQLAlchemyError`` becomes a ``WharfError``
with a one-line message; a lost connection, a statement cancelled at its timeout and a missing
table are ``StoreUnavailableError``, which :func:`outage_detail` describes to clients in fixed
words. Repositories may catch the internal subclasses to name the entity; callers otherwise get
the public base class (``EntityExistsError`` / ``EntityNotFoundError``) with a generic message.
"""

from __future__ import annotations

import enum
import re
from typing import Any

from sqlalchemy import exc as sa_exc

from wharf.core.errors import (
    EntityExistsError,
    EntityNotFoundError,
    InputError,
    StoreError,
    StoreUnavailableError,
    WharfError,
)


class UniqueViolationError(EntityExistsError):
    """A unique constraint or primary key rejected a write."""


class ForeignKeyViolationError(EntityNotFoundError):
    """A write referenced a row that does not exist."""


class DatabaseUnavailableError(StoreUnavailableError):
    """The database cannot be reached, did not answer in time, or lacks its tables. Its
    message names the database (masked URL) and the driver's reason: for logs and local
    callers, not for a service's anonymous clients."""


class SchemaMissingError(DatabaseUnavailableError):
    """A table is missing: the database was replaced or emptied under a running process."""


SCHEMA_MISSING = "schema missing; run migrations"
"""The phrase every :class:`SchemaMissingError` message holds."""


def outage_detail(error: BaseException, service: str, restart: str) -> str | None:
    """What ``service`` (e.g. "Resource Manager") tells its clients when ``error`` is a database
    outage, ``None`` when it is not one. Fixed words: the error's own message names the database
    and the driver's reason, which belong in the log. ``restart`` names what to restart so the
    tables are created again."""
    if isinstance(error, SchemaMissingError):
        return (
            f"The {service}'s database has no Wharf tables ({SCHEMA_MISSING}: "
            f"restart the {restart}, which creates them)."
        )
    if isinstance(error, DatabaseUnavailableError):
        return f"The {service}'s database is unavailable; try again later."
    return None


class RetryableConflictError(StoreError):
    """The database aborted the transaction (deadlock, serialization failure); retry it."""


class IntegrityKind(enum.Enum):
    UNIQUE = "unique"
    FOREIGN_KEY = "foreign_key"
    OTHER = "other"


# PostgreSQL SQLSTATEs and MySQL/MariaDB error numbers we act on.
_PG_UNIQUE = "23505"
_PG_FOREIGN_KEY = "23503"
_PG_RETRYABLE = frozenset({"40001", "40P01"})  # serialization_failure, deadlock_detected
_PG_UNDEFINED_TABLE = "42P01"
_PG_TIMED_OUT = frozenset({"57014", "55P03"})  # query_canceled, lock_not_available
_MY_UNIQUE = frozenset({1062, 1586})
_MY_FOREIGN_KEY = frozenset({1216, 1217, 1451, 1452})
_MY_RETRYABLE = frozenset({1213})  # deadlock found when trying to get lock
_MY_UNDEFINED_TABLE = 1146
_MY_CONNECTION_LOST = frozenset({2003, 2006, 2013, 2055})
_MY_TIMED_OUT = frozenset({1969, 3024})  # MariaDB max_statement_time, MySQL max_execution_time


def _sqlstate(orig: Any) -> str | None:
    value = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return value if isinstance(value, str) else None


def _mysql_errno(orig: Any) -> int | None:
    args: tuple[Any, ...] = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and type(orig).__module__.startswith("pymysql"):
        return args[0]
    return None


def _sqlite_name(orig: Any) -> str:
    value = getattr(orig, "sqlite_errorname", "")
    return value if isinstance(value, str) else ""


def cause(error: BaseException) -> str:
    """The driver's own message for ``error``, on one line."""
    orig = getattr(error, "orig", None) or error
    args: tuple[Any, ...] = getattr(orig, "args", ())
    if len(args) == 2 and isinstance(args[0], int) and isinstance(args[1], str):
        text = f"{args[1]} (error {args[0]})"  # pymysql: (errno, message)
    else:
        text = str(orig)
    text = re.sub(r"\s+", " ", text).strip()
    return text[:500] or type(orig).__name__


def integrity_kind(error: sa_exc.IntegrityError) -> IntegrityKind:
    orig = error.orig
    state = _sqlstate(orig)
    errno = _mysql_errno(orig)
    name = _sqlite_name(orig)
    if state == _PG_UNIQUE or errno in _MY_UNIQUE or name.endswith(("_UNIQUE", "_PRIMARYKEY")):
        return IntegrityKind.UNIQUE
    if state == _PG_FOREIGN_KEY or errno in _MY_FOREIGN_KEY or name.endswith("_FOREIGNKEY"):
        return IntegrityKind.FOREIGN_KEY
    return IntegrityKind.OTHER


def is_retryable(error: sa_exc.DBAPIError) -> bool:
    return _sqlstate(error.orig) in _PG_RETRYABLE or _mysql_errno(error.orig) in _MY_RETRYABLE


def is_undefined_table(error: sa_exc.DBAPIError) -> bool:
    orig = error.orig
    return (
        _sqlstate(orig) == _PG_UNDEFINED_TABLE
        or _mysql_errno(orig) == _MY_UNDEFINED_TABLE
        or "no such table" in str(orig)
    )


def is_timeout(error: sa_exc.DBAPIError) -> bool:
    """The server cancelled the statement at its statement timeout."""
    return _sqlstate(error.orig) in _PG_TIMED_OUT or _mysql_errno(error.orig) in _MY_TIMED_OUT


def is_connection_error(error: sa_exc.DBAPIError) -> bool:
    return error.connection_invalidated or _mysql_errno(error.orig) in _MY_CONNECTION_LOST


def unavailable(error: BaseException, masked_url: str) -> DatabaseUnavailableError:
    return DatabaseUnavailableError(
        f"Cannot connect to the metadata store at {masked_url}: {cause(error)}"
    )


def unencodable(error: UnicodeEncodeError) -> InputError:
    """A value the driver could not encode for the database: a string with a lone surrogate
    (JSON's ``"\\udc00"`` decodes to one), which no backend stores. The transaction rolled
    back; nothing was written."""
    bad = error.object[error.start : error.end]
    code = f"U+{ord(bad[0]):04X}" if bad else "a character"
    return InputError(
        f"A value cannot be stored: a string holds a lone surrogate ({code}), not text."
    )


def convert(error: sa_exc.SQLAlchemyError, masked_url: str) -> WharfError:
    """The Wharf error for ``error``, raised by a statement against the store at ``masked_url``."""
    if isinstance(error, sa_exc.IntegrityError):
        kind = integrity_kind(error)
        if kind is IntegrityKind.UNIQUE:
            return UniqueViolationError(f"The entity already exists ({cause(error)}).")
        if kind is IntegrityKind.FOREIGN_KEY:
            return ForeignKeyViolationError(f"A referenced entity does not exist ({cause(error)}).")
        return InputError(f"The metadata store rejected the values: {cause(error)}")
    if isinstance(error, sa_exc.DataError):
        return InputError(f"The metadata store rejected a value: {cause(error)}")
    if not isinstance(error, sa_exc.DBAPIError) and isinstance(
        getattr(error, "orig", None), TypeError | ValueError
    ):
        # Raised while binding parameters, e.g. a value that is not JSON-serialisable.
        return InputError(f"A value cannot be stored: {cause(error)}")
    if isinstance(error, sa_exc.DBAPIError):
        if is_retryable(error):
            return RetryableConflictError(f"Transaction conflict, retry: {cause(error)}")
        if is_connection_error(error):
            return DatabaseUnavailableError(
                f"Lost the connection to the metadata store at {masked_url}: {cause(error)}"
            )
        if is_timeout(error):
            return DatabaseUnavailableError(
                f"The metadata store at {masked_url} did not answer in time: {cause(error)}"
            )
        if is_undefined_table(error):
            return SchemaMissingError(
                f"The metadata store at {masked_url} lacks Wharf's tables ({SCHEMA_MISSING})."
            )
        if "database is locked" in str(error.orig):
            return StoreError(
                f"The SQLite database {masked_url} stayed locked by another writer: {cause(error)}"
            )
    return StoreError(f"Metadata store error at {masked_url}: {cause(error)}")
