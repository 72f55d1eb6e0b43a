"""Database URLs, engines, and the transaction helper every repository goes through (the
store's and the Resource Manager's): :func:`create_sql_engine` and :class:`Database`.

Invariants:
- One engine (one connection pool) per opened database; nothing here runs at import time.
- On SQLite, write transactions take the write lock before reading (``BEGIN IMMEDIATE``);
  read-only transactions use a deferred ``BEGIN`` and never wait for writers.
- :class:`Database` is the only place where SQLAlchemy exceptions are caught and converted
  (see :mod:`wharf.sql.errors`), and a text the driver cannot encode (a lone surrogate) too.
- Every engine refuses text holding NUL and over-large writes before a driver sees them
  (:mod:`wharf.sql.parameter_checks`).
- A forked child never uses nor closes a connection it inherited: every engine made here gets a
  new, empty pool in the child (:func:`_forget_inherited_connections`), which opens its own.
"""

from __future__ import annotations

import os
import sqlite3
import time
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url

from wharf.core.errors import InputError
from wharf.core.url_credentials import mask_credentials
from wharf.sql import errors, parameter_checks, timeouts
from wharf.sql.checkpoints import AUTOCHECKPOINT_PAGES, checkpoints_for
from wharf.sql.types import is_mysql

T = TypeVar("T")

Clock = Callable[[], datetime]

SQLITE_BUSY_TIMEOUT_SECONDS = 30
SQLITE_LOCK_TRY_MS = 10
"""How long one try for SQLite's write lock waits in SQLite's busy handler before the next try
(:func:`_begin_immediate`)."""
POOL_TIMEOUT_SECONDS = 10
HIDE_PARAMETERS = True
"""A database error's text never holds the statement's values (password and API-key hashes,
tokens): it reaches server logs and tracebacks."""
MAX_CONFLICT_RETRIES = 10
POOL_SIZE = 16
POOL_MAX_OVERFLOW = 4
PING_AFTER_IDLE_SECONDS = 10.0
_CHECKED_IN = "wharf_checked_in"
_READ_ONLY = "wharf_read_only"
_AUTOCOMMIT = "wharf_autocommit"

_DRIVER_FOR_SCHEME = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mysql+pymysql",
    "sqlite": "sqlite",
}


def utc_now() -> datetime:
    return datetime.now(UTC)


def normalize_url(url: str | URL) -> URL:
    """Parse ``url`` and pick Wharf's driver when the URL names none.

    ``postgresql://`` -> psycopg 3, ``mysql://`` / ``mariadb://`` -> PyMySQL (utf8mb4);
    explicit ``dialect+driver://`` URLs are kept as given.
    """
    try:
        parsed = make_url(url)
    except (sa_exc.ArgumentError, ValueError) as exc:  # ValueError: a port that is no number
        shown = mask_credentials(str(url))
        raise InputError(f"Invalid store URL '{shown}': {exc}") from None
    if parsed.host and "@" in parsed.host:  # the driver would name the password's tail as host
        raise InputError(
            f"Invalid store URL '{mask_url(parsed)}': a '@' in its user name or "
            "password must be written %40."
        )
    if "+" not in parsed.drivername:
        driver = _DRIVER_FOR_SCHEME.get(parsed.drivername)
        if driver is None:
            raise InputError(
                f"Unsupported store URL scheme '{parsed.drivername}'; use sqlite://, "
                "postgresql:// or mysql:// (mariadb://)."
            )
        parsed = parsed.set(drivername=driver)
    if parsed.get_backend_name() in ("mysql", "mariadb") and "charset" not in parsed.query:
        parsed = parsed.update_query_dict({"charset": "utf8mb4"})
    return parsed


def mask_url(url: str | URL) -> str:
    """``url`` with its password (if any), in its userinfo or its query (``?password=``,
    libpq's ``?sslpassword=``), replaced by ``***``."""
    try:
        return mask_credentials(make_url(url).render_as_string(hide_password=True))
    except sa_exc.ArgumentError:
        return "<invalid URL>"


SQLITE_COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database file (WAL log, its shared-memory index, rollback
journal)."""


def sqlite_files(url: str | URL) -> tuple[Path, ...]:
    """The files of the SQLite database at ``url`` (absolute: the database file, then its
    companions), () for another database or an unparsable URL.

    Only SQLite may open them in a process that has the database open: a process's POSIX
    locks on a file all go when it closes *any* descriptor of that file, so a plain
    ``open()``/``close()`` of one (to copy, hash or archive it) silently drops the locks of the
    process's SQLite connections; another process closing last then checkpoints and removes the
    log under them (lost writes, "database disk image is malformed")."""
    try:
        parsed = make_url(url)
    except sa_exc.ArgumentError:
        return ()
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return ()
    if database.startswith("file:"):  # a URI filename (``?uri=true``)
        database = database[len("file:") :].partition("?")[0]
    main = Path(database).absolute()
    return (main, *(Path(f"{main}{suffix}") for suffix in SQLITE_COMPANION_SUFFIXES))


_LIVE_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()
"""Every engine :func:`create_sql_engine` made that is still in use."""
_INHERITED_POOLS: list[Any] = []
"""A forked child's pools of its parent's connections, kept so that they are never closed."""


def _forget_inherited_connections() -> None:
    """In a forked child: give every engine a new, empty pool (``dispose(close=False)``, as
    SQLAlchemy advises), so that the child opens connections of its own. A connection used by
    two processes interleaves their messages on one socket (garbled results, "MySQL server has
    gone away", a query waiting for an answer the other process read), and one the child
    closes is ended for the parent too (PostgreSQL's and MySQL's goodbye messages). The old
    pools are kept, not dropped: a dropped SQLite connection is closed by the garbage
    collector, and a SQLite call in the child may wait for ever on a mutex that another thread
    of the parent held at the fork."""
    for engine in list(_LIVE_ENGINES):
        _INHERITED_POOLS.append(engine.pool)
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_forget_inherited_connections)


def create_sql_engine(url: str | URL) -> Engine:
    """An engine for ``url``: a pool of ``POOL_SIZE`` connections plus ``POOL_MAX_OVERFLOW`` for
    peaks (SQLAlchemy's 5 + 10 made a busy server worker reopen PostgreSQL backends), waited for
    at most ``POOL_TIMEOUT_SECONDS``.

    SQLite is configured by :func:`_sqlite_engine`. PostgreSQL/MySQL connections have connect,
    statement and socket timeouts (:mod:`.timeouts`, set in the URL's query), so a database that
    stops answering fails the request in seconds with ``StoreUnavailableError`` and the pool
    replaces the connection; they are pinged only after sitting idle (:func:`_ping_when_idle`).
    MySQL/MariaDB connections use ``READ COMMITTED``, as PostgreSQL does by default.

    Public so that other components sharing the embedded SQLite file (the in-process Resource
    Manager) get the same locking discipline.
    """
    engine = _create_engine(url)
    _LIVE_ENGINES.add(engine)
    return engine


def _create_engine(url: str | URL) -> Engine:
    parsed, limits = timeouts.Timeouts.from_url(normalize_url(url))
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed)
    connect_args = timeouts.connect_args(backend, parsed, limits)
    options: dict[str, Any] = {
        "pool_size": POOL_SIZE,
        "max_overflow": POOL_MAX_OVERFLOW,
        "pool_timeout": POOL_TIMEOUT_SECONDS,
        "hide_parameters": HIDE_PARAMETERS,
    }
    if backend in ("mysql", "mariadb"):
        options["isolation_level"] = "READ COMMITTED"
        options["pool_recycle"] = 3600  # below MySQL's default 8 h wait_timeout
    try:
        engine = create_engine(parsed, connect_args=connect_args, **options)
    except ImportError as exc:
        extra = "postgres" if backend == "postgresql" else "mysql"
        raise InputError(
            f"The database driver for {mask_url(parsed)} is not installed ({exc}); "
            f"install it with: pip install 'wharf[{extra}]'."
        ) from None
    timeouts.install(engine, limits)
    parameter_checks.install(engine)
    _ping_when_idle(engine)
    return engine


def _ping_when_idle(engine: Engine) -> None:
    """Ping a pooled connection on checkout only if it sat idle for over
    ``PING_AFTER_IDLE_SECONDS``; one in steady use is not pinged (after a database restart its
    first failure invalidates the whole pool), whereas SQLAlchemy's ``pool_pre_ping`` pings on
    every checkout."""

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_connection: Any, record: Any) -> None:
        record.info[_CHECKED_IN] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get(_CHECKED_IN)
        if since is None or time.monotonic() - since < PING_AFTER_IDLE_SECONDS:
            return  # new, or in recent use
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            # The pool discards this connection and checks out another (or opens one).
            raise sa_exc.DisconnectionError(f"Stale pooled connection: {exc}") from exc


def _enable_wal(cursor: Any) -> None:
    """Switch the file to WAL. While several processes open a brand-new file at once, the
    switch can fail at once with "database is locked" (SQLite does not wait on its busy
    handler for it), so it is retried for a while."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_SECONDS
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _sqlite_engine(url: URL) -> Engine:
    """An engine for a SQLite file, whose directory must exist: a mistyped path is refused, never
    created silently (the default store's directory is made by ``wharf.config``).

    WAL mode, ``synchronous=NORMAL``, foreign keys on, a ``SQLITE_BUSY_TIMEOUT_SECONDS`` busy
    timeout; the log is checkpointed off the writers' path (:mod:`.checkpoints`). Write
    transactions start with ``BEGIN IMMEDIATE`` (:func:`_begin_immediate`), so processes neither
    deadlock on a lock upgrade nor lose an update.
    """
    database = url.database
    if not database or database == ":memory:" or url.query.get("mode") == "memory":
        raise InputError(
            "An in-memory SQLite store cannot be shared between connections; use a file, "
            "e.g. sqlite:////tmp/wharf.db."
        )
    directory = Path(database).absolute().parent
    if not directory.is_dir():
        raise InputError(
            f"Cannot open the SQLite store {mask_url(url)}: the directory {directory} does not "
            "exist; create it first or choose another path."
        )
    engine = create_engine(
        url,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "cached_statements": 256},
        pool_size=POOL_SIZE,
        max_overflow=POOL_MAX_OVERFLOW,
        hide_parameters=HIDE_PARAMETERS,
    )

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # isolation_level=None stops pysqlite from issuing its own (deferred) BEGINs.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            # busy_timeout first: switching to WAL may have to wait for another process.
            cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_SECONDS * 1000)}")
            _enable_wal(cursor)
            cursor.execute("PRAGMA synchronous = NORMAL")
            # A safety net only: checkpoints run off the writers' path (see checkpoints).
            cursor.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        if options.get(_AUTOCOMMIT):
            # The driver is in autocommit mode already (isolation_level=None): SQLAlchemy's
            # COMMIT then finds no open transaction and is a no-op.
            return
        statement = "BEGIN" if options.get(_READ_ONLY) else "BEGIN IMMEDIATE"
        # Straight to the driver: this runs once per transaction on the per-step hot path.
        # SQLAlchemy does not wrap exceptions raised by "begin" listeners, so wrap them here.
        driver = conn.connection.driver_connection
        try:
            if options.get(_READ_ONLY):
                driver.execute(statement)  # type: ignore[union-attr]
            else:
                _begin_immediate(driver)
        except sqlite3.Error as exc:
            raise sa_exc.DBAPIError.instance(statement, None, exc, sqlite3.Error) from exc

    parameter_checks.install(engine)
    return engine


def _begin_immediate(driver: Any) -> None:
    """``BEGIN IMMEDIATE``, waiting up to ``SQLITE_BUSY_TIMEOUT_SECONDS`` for the write lock in
    tries of ``SQLITE_LOCK_TRY_MS``. SQLite's busy handler alone sleeps ever longer between its
    tries (100 ms each after the first 228 ms), so among many writers one that waited a while
    keeps missing the lock to writers that just came (``bench/sqlite_write_lock.py``); with short
    tries it sleeps a few ms at most. The connection's full busy timeout is restored
    for the statements that follow (an autocommit write, a checkpoint)."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_SECONDS
    driver.execute(f"PRAGMA busy_timeout = {SQLITE_LOCK_TRY_MS}")
    try:
        while True:
            try:
                driver.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                    raise
    finally:
        driver.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_SECONDS * 1000)}")


class Database:
    """An engine plus the store's clock; runs functions in converted, retried transactions.

    :meth:`autocommit` runs statements that are atomic on their own without a surrounding
    transaction (on MySQL/MariaDB: an ordinary write transaction).
    """

    def __init__(self, engine: Engine, masked_url: str, clock: Clock | None = None) -> None:
        self.engine = engine
        self.masked_url = masked_url
        self._clock = clock or utc_now
        self._read_engine = engine.execution_options(**{_READ_ONLY: True})
        self._autocommit_engine = self._autocommit_variant(engine)
        self.is_sqlite = engine.dialect.name == "sqlite"
        self.is_mysql = is_mysql(engine.dialect)
        database = engine.url.database
        self._checkpoints = checkpoints_for(database) if self.is_sqlite and database else None

    @staticmethod
    def _autocommit_variant(engine: Engine) -> Engine:
        if engine.dialect.name == "sqlite":
            # pysqlite already runs in autocommit mode; SQLAlchemy's AUTOCOMMIT level would turn
            # pysqlite's implicit BEGINs back on when the connection returns to the pool.
            return engine.execution_options(**{_AUTOCOMMIT: True})
        if is_mysql(engine.dialect):
            # PyMySQL switches autocommit with a query, and back on check-in: two round trips
            # to save one COMMIT. A transaction is the cheaper (and stronger) choice there.
            return engine
        return engine.execution_options(isolation_level="AUTOCOMMIT")

    def now(self) -> datetime:
        """The store's current time (aware UTC); the only time source of the store."""
        value = self._clock()
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in a read-only transaction."""
        return self._run(self._read_engine, fn)

    def write(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in a write transaction (``BEGIN IMMEDIATE`` on SQLite).

        A deadlock or serialization failure rolls everything back and runs ``fn`` again, so
        ``fn`` must derive all it writes from what it reads inside the transaction.
        """
        for _ in range(MAX_CONFLICT_RETRIES - 1):
            try:
                return self._run_writing(self.engine, fn)
            except errors.RetryableConflictError:
                continue
        return self._run_writing(self.engine, fn)

    def autocommit(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` with every statement committing on its own (no enclosing transaction;
        on MySQL/MariaDB in one transaction, see ``_autocommit_variant``).

        Only for work whose statements are each atomic and correct alone, such as a single
        conditional ``UPDATE``; like :meth:`write`, a deadlock or serialization failure runs
        ``fn`` again, so ``fn`` must be safe to repeat.
        """
        for _ in range(MAX_CONFLICT_RETRIES - 1):
            try:
                return self._run_writing(self._autocommit_engine, fn)
            except errors.RetryableConflictError:
                continue
        return self._run_writing(self._autocommit_engine, fn)

    def _run_writing(self, engine: Engine, fn: Callable[[Connection], T]) -> T:
        if self._checkpoints is None:
            return self._run(engine, fn)
        result = self._run(engine, fn)
        self._checkpoints.committed()
        return result

    def _run(self, engine: Engine, fn: Callable[[Connection], T]) -> T:
        try:
            conn = engine.connect()
        except sa_exc.SQLAlchemyError as exc:
            raise errors.unavailable(exc, self.masked_url) from exc
        try:
            with conn, conn.begin():
                return fn(conn)
        except sa_exc.SQLAlchemyError as exc:
            raise errors.convert(exc, self.masked_url) from exc
        except UnicodeEncodeError as exc:  # the driver's, raised unwrapped by SQLAlchemy too
            raise errors.unencodable(exc) from exc

    def dispose(self) -> None:
        self.engine.dispose()
