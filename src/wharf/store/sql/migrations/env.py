"""Alembic environment of the metadata store.

Normally run through :func:`wharf.store.sql.schema.upgrade`, which passes an open connection
(already inside the transaction that holds the migration lock) in ``config.attributes``. Without
one, the URL comes from the ``sqlalchemy.url`` option (``alembic -x`` style use by developers).
``render_as_batch`` lets future migrations alter tables on SQLite.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from wharf.store.sql.engine import create_sql_engine
from wharf.store.sql.tables import metadata

config = context.config


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
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
