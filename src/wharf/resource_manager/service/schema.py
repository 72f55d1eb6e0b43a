"""The Resource Manager's migration history, apart from the workspace store's.

The RM keeps its own migrations (``migrations/``) and version table (``rm_alembic_version``), so
it can live in its own database (team mode) or next to the store in the embedded SQLite file.
The checks and upgrades are the store's shared
:class:`~wharf.sql.migration_history.MigrationHistory`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from wharf.sql.engine import Database
from wharf.sql.migration_history import MigrationHistory

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Connection

HEAD_REVISION = "0002"
"""The newest migration in ``migrations/versions``; bump it with every new migration."""

VERSION_TABLE = "rm_alembic_version"
MIGRATIONS_DIR = Path(__file__).parent / "migrations"

HISTORY = MigrationHistory(
    migrations_dir=MIGRATIONS_DIR,
    head=HEAD_REVISION,
    version_table=VERSION_TABLE,
    pg_lock_key=0x57524D31,  # "WRM1"
    mysql_lock_name="wharf_rm_migration",
    schema_name="Resource Manager schema",
    missing="no Resource Manager schema",
    needs="Resource Manager revision",
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
