"""The body of an Alembic ``env.py``, shared by the metadata store's and the Resource Manager's
migration histories (they differ only in metadata, version table and autogenerate filter).

Normally run with an open connection in ``config.attributes["connection"]`` (inside the
transaction that holds the migration lock); without one, the URL comes from the
``sqlalchemy.url`` option (developer use). ``render_as_batch`` lets migrations alter tables on
SQLite.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from alembic import context
from sqlalchemy import Connection, MetaData

from wharf.sql import timeouts
from wharf.sql.engine import create_sql_engine

IncludeName = Callable[[str | None, str, Mapping[Any, Any]], bool]


def run_environment(
    metadata: MetaData,
    *,
    version_table: str | None = None,
    include_name: IncludeName | None = None,
) -> None:
    """Run the migrations Alembic was asked for, offline (SQL script) or online."""
    options: dict[str, Any] = {"target_metadata": metadata, "render_as_batch": True}
    if version_table is not None:
        options["version_table"] = version_table
    if include_name is not None:
        options["include_name"] = include_name
    config = context.config

    def migrate(**configure: Any) -> None:
        context.configure(**options, **configure)
        with context.begin_transaction():
            context.run_migrations()

    if context.is_offline_mode():
        migrate(url=config.get_main_option("sqlalchemy.url"), literal_binds=True)
        return
    connection: Connection | None = config.attributes.get("connection")
    if connection is not None:
        migrate(connection=connection, compare_type=True)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("Set sqlalchemy.url or pass a connection in config.attributes.")
    engine = create_sql_engine(url)
    try:
        with engine.begin() as conn, timeouts.lifted(conn):
            migrate(connection=conn, compare_type=True)
    finally:
        engine.dispose()
