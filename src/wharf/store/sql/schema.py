"""Schema version check and Alembic upgrades of the metadata store.

Opening a store costs one plain query on ``alembic_version``; Alembic is imported only when the
revision found is not :data:`HEAD_REVISION` (a test pins that constant to Alembic's head).

Outcomes of :func:`ensure_schema`:
- revision is head: nothing to do;
- no schema yet, or an older revision known to this code: upgrade to head if ``migrate``,
  otherwise :class:`SchemaVersionError`;
- a revision this code does not know (written by a newer Wharf): :class:`SchemaVersionError`,
  never an attempt to migrate.

Concurrent upgrades are serialised: by ``BEGIN IMMEDIATE`` on SQLite, a transaction-scoped
advisory lock on PostgreSQL and a named lock (``GET_LOCK``) on MySQL/MariaDB, held on its own
connection until the upgrade has committed. Alembic re-reads the revision once it holds the
lock, so the second opener finds head and does nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, text
from sqlalchemy import exc as sa_exc

from wharf.core.errors import SchemaVersionError, StoreError
from wharf.store.sql import errors
from wharf.store.sql.engine import Database

if TYPE_CHECKING:
    from alembic.config import Config

HEAD_REVISION = "0004"
"""The newest migration in ``migrations/versions``; bump it with every new migration."""

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_PG_LOCK_KEY = 0x57484152  # "WHAR": any constant shared by every Wharf process
_MYSQL_LOCK_NAME = "wharf_store_migration"
_MYSQL_LOCK_TIMEOUT_SECONDS = 300


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration for the store's migrations, built without an ini file."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return {rev.revision for rev in script.walk_revisions()}


def current_revision(db: Database) -> str | None:
    """The revision stored in the database; None if it has no schema yet."""

    def query(conn: Connection) -> list[str]:
        return list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())

    try:
        revisions = db.read(query)
    except StoreError as exc:
        cause = exc.__cause__
        if isinstance(cause, sa_exc.DBAPIError) and errors.is_undefined_table(cause):
            return None
        raise
    if len(revisions) > 1:
        raise SchemaVersionError(
            f"The database at {db.masked_url} has several schema revisions "
            f"({', '.join(sorted(revisions))}); it was not migrated by Wharf."
        )
    return revisions[0] if revisions else None


def ensure_schema(db: Database, *, migrate: bool) -> None:
    revision = current_revision(db)
    if revision == HEAD_REVISION:
        return
    if revision is not None and revision not in known_revisions():
        raise SchemaVersionError(
            f"The database schema (revision {revision}) is newer than this Wharf "
            f"(head {HEAD_REVISION}); upgrade Wharf."
        )
    if not migrate:
        found = "no Wharf schema" if revision is None else f"schema revision {revision}"
        raise SchemaVersionError(
            f"The database at {db.masked_url} has {found}, this Wharf needs revision "
            f"{HEAD_REVISION}; open the store with migrate=True to upgrade it."
        )
    upgrade(db)


def upgrade(db: Database) -> None:
    """Upgrade the database to head, holding the migration lock until the upgrade committed."""
    from alembic import command

    def run(conn: Connection) -> None:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
        command.upgrade(alembic_config(conn), "head")

    if not db.is_mysql:
        db.write(run)  # the lock is the transaction's: released by its commit
        return
    with _mysql_migration_lock(db):
        db.write(run)


@contextlib.contextmanager
def _mysql_migration_lock(db: Database) -> Iterator[None]:
    """Hold MySQL's named migration lock on a connection of its own.

    ``GET_LOCK`` belongs to the session, not the transaction: taken on the migrating connection
    it would be released before that transaction commits, and a waiting process could then read
    the previous revision (the last DDL's implicit commit made it visible) and run the newest
    migration a second time.
    """
    try:
        conn = db.engine.connect()
    except sa_exc.SQLAlchemyError as exc:
        raise errors.unavailable(exc, db.masked_url) from exc
    with conn:
        try:
            got = conn.execute(
                text("SELECT GET_LOCK(:name, :timeout)"),
                {"name": _MYSQL_LOCK_NAME, "timeout": _MYSQL_LOCK_TIMEOUT_SECONDS},
            ).scalar()
            conn.commit()  # end the (empty) transaction; the lock stays with the session
        except sa_exc.SQLAlchemyError as exc:
            raise errors.convert(exc, db.masked_url) from exc
        if got != 1:
            raise SchemaVersionError(
                f"Timed out waiting for another process to migrate {db.masked_url}."
            )
        try:
            yield
        finally:
            _release_mysql_lock(conn)


def _release_mysql_lock(conn: Connection) -> None:
    # Best effort: if the connection broke, the server has released the lock with the session.
    with contextlib.suppress(sa_exc.DBAPIError):
        conn.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": _MYSQL_LOCK_NAME})
        conn.commit()
