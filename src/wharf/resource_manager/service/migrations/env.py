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

from wharf.resource_manager.service.tables import metadata
from wharf.sql.alembic_env import run_environment

VERSION_TABLE = "rm_alembic_version"
TABLE_PREFIX = "rm_"


def include_name(name: str | None, type_: str, _parents: Mapping[Any, Any]) -> bool:
    """Autogenerate compares only the Resource Manager's own tables."""
    if type_ == "table":
        return name is not None and name.startswith(TABLE_PREFIX) and name != VERSION_TABLE
    return True


run_environment(metadata, version_table=VERSION_TABLE, include_name=include_name)
