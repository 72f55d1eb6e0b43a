"""The SQL metadata store (SQLite, PostgreSQL, MySQL/MariaDB) behind ``wharf.store.ports``.

- ``engine``: URLs, engines (SQLite locking discipline) and the transaction helper;
- ``errors``: the only place driver exceptions are interpreted and converted;
- ``types`` / ``tables``: the schema, the single source of truth for ``migrations``;
- ``schema``: revision check and Alembic upgrades;
- ``repositories``: one module per aggregate; ``store``: the :class:`SqlStore` bundle.

Nothing in this package escapes SQLAlchemy exceptions or creates engines at import time.
"""

from wharf.store.sql.store import SqlStore

__all__ = ["SqlStore"]
