"""The metadata store's migration history (``migrations/``, version table ``alembic_version``).

The checks and upgrades themselves are :class:`~wharf.sql.migration_history
.MigrationHistory`'s; this module names the store's history and keeps its entry points.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from wharf.sql.engine import Database
from wharf.sql.migration_history import MigrationHistory

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Connection

HEAD_REVISION = "0007"
"""The newest migration in ``migrations/versions``; bump it with every new migration."""

MIGRATIONS_DIR = Path(__file__).parent / "migrations"

HISTORY = MigrationHistory(
    migrations_dir=MIGRATIONS_DIR,
    head=HEAD_REVISION,
    version_table="alembic_version",
    pg_lock_key=0x57484152,  # "WHAR"
    mysql_lock_name="wharf_store_migration",
    schema_name="database schema",
    missing="no Wharf schema",
    needs="revision",
)


def alembic_config(connection: Connection | None = None) -> Config:
    return HISTORY.alembic_config(connection)


def known_revisions() -> set[str]:
    return HISTORY.known_revisions()


def current_revision(db: Database) -> str | None:
    return HISTORY.current_revision(db)


def ensure_schema(db: Database, *, migrate: bool) -> None:
    HISTORY.ensure(db, migrate=migrate)


def upgrade(db: Database) -> None:
    HISTORY.upgrade(db)
