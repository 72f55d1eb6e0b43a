"""The shared SQL toolkit: SQLite, PostgreSQL and MySQL/MariaDB through SQLAlchemy Core.

Used by the metadata store (``wharf.store.sql``) and the Resource Manager's service
(``wharf.resource_manager.service``); owned by neither, it owns no table and imports neither.

- ``engine``: URLs, engines (SQLite locking discipline), :class:`~wharf.sql.engine.Database`;
- ``errors``: the only place driver exceptions are interpreted and converted;
- ``types``: column types that behave alike on every backend; ``conventions``: the naming
  convention and table options every schema uses;
- ``migration_history`` / ``alembic_env``: checking and upgrading one Alembic history;
- ``direct``: the store's per-step statements on the driver's cursor;
- ``checkpoints``: a SQLite file's WAL checkpoints, off the writers' path.

Nothing here creates an engine at import time or lets a SQLAlchemy exception escape
``Database``.
"""
