"""Checking and upgrading one Alembic migration history (:class:`MigrationHistory`): the store's,
or the Resource Manager's, which keeps its own version table so it can share a database with
the store.

Invariants: opening costs one plain query on the version table (Alembic is imported only when
the revision found is not head); a revision this code does not know is never migrated; concurrent
upgrades are serialised, so the second opener finds head and does nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, text
from sqlalchemy import exc as sa_exc

from wharf.core.errors import SchemaVersionError, StoreError
from wharf.sql import errors, timeouts
from wharf.sql.engine import Database

if TYPE_CHECKING:
    from alembic.config import Config

_MYSQL_LOCK_TIMEOUT_SECONDS = 300


@dataclass(frozen=True)
class MigrationHistory:
    migrations_dir: Path
    head: str
    """The newest migration in ``migrations_dir/versions``; bumped with every new migration."""
    version_table: str
    pg_lock_key: int
    """Any constant shared by every process migrating this history."""
    mysql_lock_name: str
    schema_name: str
    """How messages name the schema: "database schema", "Resource Manager schema"."""
    missing: str
    """How messages say there is no schema yet."""
    needs: str
    """How messages name the revision this code needs."""

    def alembic_config(self, connection: Connection | None = None) -> Config:
        """Alembic's configuration for this history, built without an ini file."""
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(self.migrations_dir))
        if connection is not None:
            config.attributes["connection"] = connection
        return config

    def known_revisions(self) -> set[str]:
        from alembic.script import ScriptDirectory

        script = ScriptDirectory.from_config(self.alembic_config())
        return {rev.revision for rev in script.walk_revisions()}

    def current_revision(self, db: Database) -> str | None:
        """The revision stored in the database; None if it has no schema yet."""

        def query(conn: Connection) -> list[str]:
            statement = text(f"SELECT version_num FROM {self.version_table}")
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
                f"The database at {db.masked_url} has several {self.schema_name} revisions "
                f"({', '.join(sorted(revisions))}); it was not migrated by Wharf."
            )
        return revisions[0] if revisions else None

    def ensure(self, db: Database, *, migrate: bool) -> None:
        """Make sure the database is at head: nothing to do if it is; no schema yet, or an older
        revision known to this code, is upgraded if ``migrate`` (else :class:`SchemaVersionError`);
        a revision this code does not know (written by a newer Wharf) is a
        :class:`SchemaVersionError`, never an attempt to migrate."""
        revision = self.current_revision(db)
        if revision == self.head:
            return
        if revision is not None and revision not in self.known_revisions():
            raise SchemaVersionError(
                f"The {self.schema_name} (revision {revision}) is newer than this Wharf "
                f"(head {self.head}); upgrade Wharf."
            )
        if not migrate:
            found = self.missing if revision is None else f"schema revision {revision}"
            raise SchemaVersionError(
                f"The database at {db.masked_url} has {found}, this Wharf needs {self.needs} "
                f"{self.head}; open it with migrate=True to upgrade it."
            )
        self.upgrade(db)

    def upgrade(self, db: Database) -> None:
        """Upgrade to head, holding the migration lock until the upgrade committed.

        The lock is ``BEGIN IMMEDIATE`` on SQLite, a transaction-scoped advisory lock on
        PostgreSQL and a named lock (``GET_LOCK``) on MySQL/MariaDB, held on its own connection.
        Alembic re-reads the revision once it holds the lock, so the second opener finds head
        and does nothing.
        """
        from alembic import command

        def run(conn: Connection) -> None:
            with timeouts.lifted(conn):  # a migration, or the wait for another's, may be long
                if conn.dialect.name == "postgresql":
                    lock = text("SELECT pg_advisory_xact_lock(:key)")
                    conn.execute(lock, {"key": self.pg_lock_key})
                command.upgrade(self.alembic_config(conn), "head")

        if not db.is_mysql:
            db.write(run)  # the lock is the transaction's: released by its commit
            return
        with self._mysql_migration_lock(db):
            db.write(run)

    @contextlib.contextmanager
    def _mysql_migration_lock(self, db: Database) -> Iterator[None]:
        """Hold MySQL's named migration lock on a connection of its own.

        ``GET_LOCK`` belongs to the session, not the transaction: taken on the migrating
        connection it would be released before that transaction commits, and a waiting process
        could then read the previous revision (the last DDL's implicit commit made it visible)
        and run the newest migration a second time.
        """
        try:
            conn = db.engine.connect()
        except sa_exc.SQLAlchemyError as exc:
            raise errors.unavailable(exc, db.masked_url) from exc
        with conn:
            try:
                with timeouts.lifted(conn):
                    got = conn.execute(
                        text("SELECT GET_LOCK(:name, :timeout)"),
                        {"name": self.mysql_lock_name, "timeout": _MYSQL_LOCK_TIMEOUT_SECONDS},
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
                # Best effort: if the connection broke, the server released the lock with it.
                with contextlib.suppress(sa_exc.DBAPIError):
                    conn.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": self.mysql_lock_name})
                    conn.commit()
