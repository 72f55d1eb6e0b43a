"""Alembic environment of the metadata store.

Normally run through :func:`wharf.store.sql.schema.upgrade`, which passes an open connection
(already inside the transaction that holds the migration lock) in ``config.attributes``. Without
one, the URL comes from the ``sqlalchemy.url`` option (``alembic -x`` style use by developers).
``render_as_batch`` lets future migrations alter tables on SQLite.
"""

from __future__ import annotations

from wharf.sql.alembic_env import run_environment
from wharf.store.sql.tables import metadata

run_environment(metadata)
