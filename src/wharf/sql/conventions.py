"""The naming convention and table options every Wharf schema uses (the metadata store's and
the Resource Manager's): :data:`NAMING_CONVENTION`, :data:`TABLE_OPTIONS`, :func:`new_metadata`.

Invariants: constraint and index names derive from table and column names only, so every
backend gets the same names and the migrations keep matching the tables (changing a pattern
renames constraints and needs a migration for every schema); migrations keep their own frozen
copies of these values.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import MetaData

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Names of constraints and indexes, from table and column names only (the migrations spell them
out)."""

TABLE_OPTIONS: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}
"""Keyword arguments of every table: ``Table(name, metadata, *columns, **TABLE_OPTIONS)``.
InnoDB with utf8mb4 and a binary collation on MySQL/MariaDB, so names compare case-sensitively
there as they do on SQLite and PostgreSQL (other backends ignore these)."""


def new_metadata() -> MetaData:
    """A fresh :class:`MetaData` for one schema, with :data:`NAMING_CONVENTION`."""
    return MetaData(naming_convention=NAMING_CONVENTION)
