"""A request's demands and allocations become JSON columns of its row.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

``rm_request_demands`` and ``rm_allocations`` held one row per demand and per allocation, each
with its own index entries and a foreign-key check, written with every creation and admission
although nothing ever selected requests through them. Their rows move, in order, into
``rm_requests.demands`` and ``rm_requests.allocations`` (JSON lists of objects keyed by the old
column names, ``None`` values left out, ``request_id`` implied by the row); a request without
allocations gets ``[]``. The columns are nullable only so that they can be added without
rebuilding the table (which SQLite would need for NOT NULL); Wharf never writes NULL into them.
The downgrade moves them back.

Frozen history: only SQLAlchemy types and literal data, never Wharf's own code.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
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
_DEMAND_COLUMNS = (
    ("resource", NAME),
    ("kind", sa.String(64)),
    ("resource_selector", JSON_TEXT),
    ("quantity", sa.BigInteger()),
    ("unit", sa.String(64)),
    ("class_name", NAME),
    ("class_selector", JSON_TEXT),
)
_JSON_DEMAND_COLUMNS = ("resource_selector", "class_selector")
_ALLOCATION_COLUMNS = (
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
_UUID_ALLOCATION_COLUMNS = ("id", "pool_id", "policy_id")
_CHUNK = 500


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


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


def _demand_entry(row: sa.Row[Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    for name, _ in _DEMAND_COLUMNS:
        value = getattr(row, name)
        if value is None:
            continue
        entry[name] = json.loads(value) if name in _JSON_DEMAND_COLUMNS else value
    return entry


def _allocation_entry(row: sa.Row[Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    for name, _ in _ALLOCATION_COLUMNS:
        value = getattr(row, name)
        if value is None:
            continue
        if name in _UUID_ALLOCATION_COLUMNS:
            value = str(value)
        elif name == "target_settings":
            value = json.loads(value)
        elif name == "priority_lane":
            value = bool(value)
        entry[name] = value
    return entry


def _grouped(rows: Iterable[sa.Row[Any]], entry: Any) -> dict[uuid.UUID, list[dict[str, Any]]]:
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
        _demand_entry,
    )
    by_allocations = _grouped(
        conn.execute(
            sa.select(allocations).order_by(
                allocations.c.request_id, allocations.c.demand_index, allocations.c.resource
            )
        ),
        _allocation_entry,
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
        for position, entry in enumerate(json.loads(row.demands)):
            demand: dict[str, Any] = {"request_id": row.id, "position": position}
            for name, _ in _DEMAND_COLUMNS:
                value = entry.get(name)
                if name in _JSON_DEMAND_COLUMNS and value is not None:
                    value = _dumps(value)
                demand[name] = value
            demand_rows.append(demand)
        for entry in json.loads(row.allocations):
            allocation: dict[str, Any] = {"request_id": row.id}
            for name, _ in _ALLOCATION_COLUMNS:
                value = entry.get(name)
                if name in _UUID_ALLOCATION_COLUMNS:
                    value = uuid.UUID(value)
                elif name == "target_settings":
                    value = _dumps(value or {})
                elif name == "priority_lane":
                    value = bool(value)
                allocation[name] = value
            allocation_rows.append(allocation)
    if demand_rows:
        op.bulk_insert(_demands(), demand_rows)
    if allocation_rows:
        op.bulk_insert(_allocations(), allocation_rows)
    # Not in batch mode: on SQLite it would rebuild rm_requests, and dropping the old table
    # would cascade to the subject and metadata rows (foreign keys are on).
    op.drop_column("rm_requests", "allocations")
    op.drop_column("rm_requests", "demands")
