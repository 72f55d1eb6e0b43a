"""The shared SQL toolkit: SQLite, PostgreSQL and MySQL/MariaDB through SQLAlchemy Core.

Used by the metadata store (``wharf.store.sql``) and the Resource Manager's service
(``wharf.resource_manager.service``); owned by neither, it owns no table and imports neither.
Modules: ``engine`` (URLs, engines, ``Database``), ``errors``, ``types``, ``conventions``,
``migration_history`` / ``alembic_env``, ``direct`` and ``checkpoints``.

Invariants: nothing here creates an engine at import time; driver exceptions are interpreted
only in ``errors``, and no SQLAlchemy exception escapes ``Database``.
"""
