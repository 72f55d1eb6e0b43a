"""The SQL metadata store (SQLite, PostgreSQL, MySQL/MariaDB) behind ``wharf.store.ports``:
``tables`` (the schema, the single source of truth for ``migrations``), ``schema`` (revision
check and upgrades), ``repositories`` (one module per aggregate) and ``store`` (:class:`SqlStore`).

Engines, column types, error conversion and migration plumbing come from :mod:`wharf.sql`.
Invariant: nothing in this package lets a SQLAlchemy exception escape or creates engines at
import time.
"""

from wharf.store.sql.store import SqlStore

__all__ = ["SqlStore"]
