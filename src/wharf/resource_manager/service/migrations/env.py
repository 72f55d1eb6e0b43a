"""Alembic environment of the Resource Manager (its own history, apart from the store's).

Normally run through :func:`wharf.resource_manager.service.schema.upgrade`, which passes an open
connection (inside the transaction that holds the migration lock) in ``config.attributes``.
Without one, the URL comes from the ``sqlalchemy.url`` option (developer use).

Invariants: the version table is ``rm_alembic_version`` and autogenerate only ever looks at
``rm_`` tables, so the embedded SQLite file can hold the workspace store's tables and history
next to these without either migration history seeing the other's tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from alembic import context
from sqlalchemy import Connection

from wharf.resource_manager.service.tables import metadata
from wharf.store.sql.engine import create_sql_engine

VERSION_TABLE = "rm_alembic_version"
TABLE_PREFIX = "rm_"

config = context.config


def include_name(name: str | None, type_: str, _parents: Mapping[Any, Any]) -> bool:
    """Autogenerate compares only the Resource Manager's own tables."""
    if type_ == "table":
        return name is not None and name.startswith(TABLE_PREFIX) and name != VERSION_TABLE
    return True


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_name=include_name,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_name=include_name,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("Set sqlalchemy.url or pass a connection in config.attributes.")
    engine = create_sql_engine(url)
    try:
        with engine.begin() as conn:
            _configure(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
