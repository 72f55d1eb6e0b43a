"""The SQL metadata store (SQLite, PostgreSQL, MySQL/MariaDB) behind ``wharf.store.ports``.

- ``tables``: the schema, the single source of truth for ``migrations``;
- ``schema``: revision check and Alembic upgrades;
- ``repositories``: one module per aggregate; ``store``: the :class:`SqlStore` bundle.

Engines, column types, error conversion and migration plumbing come from the shared SQL
toolkit (:mod:`wharf.sql`). Nothing in this package escapes SQLAlchemy exceptions or creates
engines at import time.
"""

from wharf.store.sql.store import SqlStore

__all__ = ["SqlStore"]
