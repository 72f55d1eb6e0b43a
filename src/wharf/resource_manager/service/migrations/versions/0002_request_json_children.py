"""A request's demands and allocations become JSON columns of its row.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

The rows of ``rm_request_demands`` and ``rm_allocations`` move, in order, into
``rm_requests.demands`` and ``rm_requests.allocations`` (JSON lists of objects keyed by the old
column names, ``None`` values left out, ``request_id`` implied by the row); a request without
allocations gets ``[]``. The columns are nullable only so that they can be added without
rebuilding the table (which SQLite would need for NOT NULL); Wharf never writes NULL into them.
The downgrade moves them back. Frozen history: only SQLAlchemy types and literal data.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

_MYSQL = ("mysql", "mariadb")
JSON_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), *_MYSQL)
UUID = sa.Uuid().with_variant(sa.Uuid(native_uuid=False), *_MYSQL)
NAME = sa.String(128)
TABLE_OPTIONS: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}
Columns = tuple[tuple[str, Any], ...]
_DEMAND_COLUMNS: Columns = (
    ("resource", NAME),
    ("kind", sa.String(64)),
    ("resource_selector", JSON_TEXT),
    ("quantity", sa.BigInteger()),
    ("unit", sa.String(64)),
    ("class_name", NAME),
    ("class_selector", JSON_TEXT),
)
_ALLOCATION_COLUMNS: Columns = (
    ("id", UUID),
    ("demand_index", sa.Integer()),
    ("pool_id", UUID),
    ("class_name", NAME),
    ("resource", NAME),
    ("resource_kind", sa.String(64)),
    ("quantity", sa.BigInteger()),
    ("unit", sa.String(64)),
    ("base_quantity", sa.BigInteger()),
    ("policy_id", UUID),
    ("priority", sa.BigInteger()),
    ("priority_lane", sa.Boolean()),
    ("target_settings", JSON_TEXT),
)
_CHUNK = 500


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


Codecs = dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]]
"""Column name -> (column value to JSON value, JSON value to column value); others as they are."""
_DEMAND_CODECS: Codecs = {
    "resource_selector": (json.loads, _dumps),
    "class_selector": (json.loads, _dumps),
}
_ALLOCATION_CODECS: Codecs = {
    "id": (str, uuid.UUID),
    "pool_id": (str, uuid.UUID),
    "policy_id": (str, uuid.UUID),
    "target_settings": (json.loads, _dumps),
    "priority_lane": (bool, bool),
}


def _requests() -> sa.TableClause:
    return sa.table(
        "rm_requests",
        sa.column("id", UUID),
        sa.column("demands", JSON_TEXT),
        sa.column("allocations", JSON_TEXT),
    )


def _demands() -> sa.TableClause:
    return sa.table(
        "rm_request_demands",
        sa.column("request_id", UUID),
        sa.column("position", sa.Integer()),
        *(sa.column(name, type_) for name, type_ in _DEMAND_COLUMNS),
    )


def _allocations() -> sa.TableClause:
    return sa.table(
        "rm_allocations",
        sa.column("request_id", UUID),
        *(sa.column(name, type_) for name, type_ in _ALLOCATION_COLUMNS),
    )


def _entry(row: sa.Row[Any], columns: Columns, codecs: Codecs) -> dict[str, Any]:
    """A child row as a JSON entry keyed by column name, None values left out."""
    entry: dict[str, Any] = {}
    for name, _ in columns:
        value = getattr(row, name)
        if value is not None:
            entry[name] = codecs[name][0](value) if name in codecs else value
    return entry


def _column_values(entry: dict[str, Any], columns: Columns, codecs: Codecs) -> dict[str, Any]:
    """A JSON entry back as the child row's column values (missing ones None)."""
    values: dict[str, Any] = {}
    for name, _ in columns:
        value = entry.get(name)
        values[name] = codecs[name][1](value) if value is not None and name in codecs else value
    return values


def _grouped(
    rows: Iterable[sa.Row[Any]], entry: Callable[[sa.Row[Any]], dict[str, Any]]
) -> dict[uuid.UUID, list[dict[str, Any]]]:
    grouped: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row.request_id, []).append(entry(row))
    return grouped


def upgrade() -> None:
    op.add_column("rm_requests", sa.Column("demands", JSON_TEXT, nullable=True))
    op.add_column("rm_requests", sa.Column("allocations", JSON_TEXT, nullable=True))
    conn = op.get_bind()
    requests, demands, allocations = _requests(), _demands(), _allocations()
    by_demands = _grouped(
        conn.execute(sa.select(demands).order_by(demands.c.request_id, demands.c.position)),
        lambda row: _entry(row, _DEMAND_COLUMNS, _DEMAND_CODECS),
    )
    by_allocations = _grouped(
        conn.execute(
            sa.select(allocations).order_by(
                allocations.c.request_id, allocations.c.demand_index, allocations.c.resource
            )
        ),
        lambda row: _entry(row, _ALLOCATION_COLUMNS, _ALLOCATION_CODECS),
    )
    ids = list(conn.execute(sa.select(requests.c.id)).scalars())
    for start in range(0, len(ids), _CHUNK):
        conn.execute(
            sa.update(requests)
            .where(requests.c.id == sa.bindparam("b_id"))
            .values(demands=sa.bindparam("b_demands"), allocations=sa.bindparam("b_allocations")),
            [
                {
                    "b_id": key,
                    "b_demands": _dumps(by_demands.get(key, [])),
                    "b_allocations": _dumps(by_allocations.get(key, [])),
                }
                for key in ids[start : start + _CHUNK]
            ],
        )
    op.drop_table("rm_allocations")
    op.drop_table("rm_request_demands")


def downgrade() -> None:
    op.create_table(
        "rm_request_demands",
        sa.Column("request_id", UUID, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False, autoincrement=False),
        *(sa.Column(name, type_, nullable=name != "quantity") for name, type_ in _DEMAND_COLUMNS),
        sa.PrimaryKeyConstraint("request_id", "position", name="pk_rm_request_demands"),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["rm_requests.id"],
            name="fk_rm_request_demands_request_id_rm_requests",
            ondelete="CASCADE",
        ),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "rm_allocations",
        sa.Column("request_id", UUID, nullable=False),
        *(
            sa.Column(name, type_, nullable=name == "demand_index")
            for name, type_ in _ALLOCATION_COLUMNS
        ),
        sa.PrimaryKeyConstraint("id", name="pk_rm_allocations"),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["rm_requests.id"],
            name="fk_rm_allocations_request_id_rm_requests",
            ondelete="CASCADE",
        ),
        **TABLE_OPTIONS,
    )
    op.create_index("ix_rm_allocations_request_id", "rm_allocations", ["request_id"])
    op.create_index("ix_rm_allocations_pool_id", "rm_allocations", ["pool_id"])
    conn = op.get_bind()
    requests = _requests()
    demand_rows: list[dict[str, Any]] = []
    allocation_rows: list[dict[str, Any]] = []
    for row in conn.execute(sa.select(requests)):
        demand_rows.extend(
            {
                "request_id": row.id,
                "position": position,
                **_column_values(entry, _DEMAND_COLUMNS, _DEMAND_CODECS),
            }
            for position, entry in enumerate(json.loads(row.demands))
        )
        allocation_rows.extend(
            {"request_id": row.id, **_column_values(entry, _ALLOCATION_COLUMNS, _ALLOCATION_CODECS)}
            for entry in json.loads(row.allocations)
        )
    if demand_rows:
        op.bulk_insert(_demands(), demand_rows)
    if allocation_rows:
        op.bulk_insert(_allocations(), allocation_rows)
    # Not in batch mode: on SQLite it would rebuild rm_requests, and dropping the old table
    # would cascade to the subject and metadata rows (foreign keys are on).
    op.drop_column("rm_requests", "allocations")
    op.drop_column("rm_requests", "demands")
