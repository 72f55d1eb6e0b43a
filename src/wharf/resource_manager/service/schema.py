"""Schema version check and Alembic upgrades of the Resource Manager's tables.

The RM keeps its own migration history (``migrations/``, version table ``rm_alembic_version``),
apart from the workspace store's, so it can live in its own database (team mode) or next to the
store in the embedded SQLite file. Opening a service costs one plain query on the version table;
Alembic is imported only when the revision found is not :data:`HEAD_REVISION`.

Outcomes of :func:`ensure_schema`:
- revision is head: nothing to do;
- no RM schema yet, or an older revision known to this code: upgrade to head if ``migrate``,
  otherwise :class:`SchemaVersionError`;
- a revision this code does not know (written by a newer Wharf): :class:`SchemaVersionError`,
  never an attempt to migrate.

Concurrent upgrades are serialised like the store's: ``BEGIN IMMEDIATE`` on SQLite, a
transaction-scoped advisory lock on PostgreSQL, and a named lock held on a connection of its own
on MySQL/MariaDB (``GET_LOCK`` belongs to the session, not the transaction).
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

HEAD_REVISION = "0001"
"""The newest migration in ``migrations/versions``; bump it with every new migration."""

VERSION_TABLE = "rm_alembic_version"
MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_PG_LOCK_KEY = 0x57524D31  # "WRM1": shared by every Resource Manager process
_MYSQL_LOCK_NAME = "wharf_rm_migration"
_MYSQL_LOCK_TIMEOUT_SECONDS = 300


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration for the RM's migrations, built without an ini file."""
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
    """The RM revision stored in the database; None if it has no RM schema yet."""

    def query(conn: Connection) -> list[str]:
        statement = text(f"SELECT version_num FROM {VERSION_TABLE}")
        return list(conn.execute(statement).scalars())

    try:
        revisions = db.read(query)
    except StoreError as exc:
        cause = exc.__cause__
        if isinstance(cause, sa_exc.DBAPIError) and errors.is_undefined_table(cause):
            return None
        raise
    if len(revisions) > 1:
        raise SchemaVersionError(
            f"The database at {db.masked_url} has several Resource Manager schema revisions "
            f"({', '.join(sorted(revisions))}); it was not migrated by Wharf."
        )
    return revisions[0] if revisions else None


def ensure_schema(db: Database, *, migrate: bool) -> None:
    revision = current_revision(db)
    if revision == HEAD_REVISION:
        return
    if revision is not None and revision not in known_revisions():
        raise SchemaVersionError(
            f"The Resource Manager schema (revision {revision}) is newer than this Wharf "
            f"(head {HEAD_REVISION}); upgrade Wharf."
        )
    if not migrate:
        found = "no Resource Manager schema" if revision is None else f"revision {revision}"
        raise SchemaVersionError(
            f"The database at {db.masked_url} has {found}, this Wharf needs Resource Manager "
            f"revision {HEAD_REVISION}; open it with migrate=True to upgrade it."
        )
    upgrade(db)


def upgrade(db: Database) -> None:
    """Upgrade the RM tables to head, holding the migration lock until the upgrade committed."""
    from alembic import command

    def run(conn: Connection) -> None:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
        command.upgrade(alembic_config(conn), "head")

    if not db.is_mysql:
        db.write(run)
        return
    with _mysql_migration_lock(db):
        db.write(run)


@contextlib.contextmanager
def _mysql_migration_lock(db: Database) -> Iterator[None]:
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
            with contextlib.suppress(sa_exc.DBAPIError):
                conn.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": _MYSQL_LOCK_NAME})
                conn.commit()
