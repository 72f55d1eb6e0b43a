"""Initial schema of the Resource Manager, with the stock descriptors and the state row.

Revision ID: 0001
Revises:
Create Date: 2026-01-01

Written by hand to match ``wharf/resource_manager/service/tables.py`` (a test compares them on
every backend). Migrations are frozen history: they use only SQLAlchemy types and literal data,
never Wharf's own types or constants, so later code changes cannot change what this creates.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

_MYSQL = ("mysql", "mariadb")
DATETIME = sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), *_MYSQL)
JSON_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), *_MYSQL)
UUID = sa.Uuid().with_variant(sa.Uuid(native_uuid=False), *_MYSQL)
NAME = sa.String(128)
KEY = sa.String(255)
SHORT = sa.String(32)
TABLE_OPTIONS: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}

_BYTE_UNITS = [
    ("B", 1),
    ("KB", 1000),
    ("KiB", 1024),
    ("MB", 1000**2),
    ("MiB", 1024**2),
    ("GB", 1000**3),
    ("GiB", 1024**3),
    ("TB", 1000**4),
    ("TiB", 1024**4),
    ("PB", 1000**5),
    ("PiB", 1024**5),
]
STOCK_DESCRIPTORS: list[dict[str, Any]] = [
    {
        "name": "CPU",
        "kind": "cpu",
        "units": [{"name": "mCPU", "multiplier": 1}, {"name": "CPU", "multiplier": 1000}],
        "default_unit": "CPU",
        "description": "Processor time; the base unit is one thousandth of a CPU.",
    },
    {
        "name": "memory",
        "kind": "memory",
        "units": [{"name": name, "multiplier": value} for name, value in _BYTE_UNITS],
        "default_unit": "B",
        "description": "Memory in bytes; decimal (KB, MB, ...) and binary (KiB, MiB, ...) units.",
    },
    {
        "name": "GPU",
        "kind": "gpu",
        "units": [{"name": "GPU", "multiplier": 1}],
        "default_unit": "GPU",
        "description": "Whole GPUs; the capacity class says which model.",
    },
]


def _pk(table: str, *columns: str) -> sa.PrimaryKeyConstraint:
    return sa.PrimaryKeyConstraint(*(columns or ("id",)), name=f"pk_{table}")


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=f"fk_{table}_{column}_{target}", ondelete="CASCADE"
    )


def _uq(table: str, *columns: str) -> sa.UniqueConstraint:
    return sa.UniqueConstraint(*columns, name=f"uq_{table}_{'_'.join(columns)}")


def _index(table: str, *columns: str) -> None:
    op.create_index(f"ix_{table}_{'_'.join(columns)}", table, list(columns))


def _created() -> list[sa.Column[Any]]:
    return [
        sa.Column("created", DATETIME, nullable=False),
        sa.Column("updated", DATETIME, nullable=False),
    ]


def upgrade() -> None:
    _configuration_tables()
    _request_tables()
    op.create_table(
        "rm_idempotency_keys",
        sa.Column("principal", KEY, nullable=False),
        sa.Column("operation", sa.String(64), nullable=False),
        sa.Column("key", KEY, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("response", JSON_TEXT, nullable=False),
        sa.Column("created", DATETIME, nullable=False),
        _pk("rm_idempotency_keys", "principal", "operation", "key"),
        **TABLE_OPTIONS,
    )
    _index("rm_idempotency_keys", "created")
    state = op.create_table(
        "rm_state",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("state_version", sa.BigInteger(), nullable=False),
        sa.Column("config_version", sa.BigInteger(), nullable=False),
        sa.Column("leader_id", sa.String(64), nullable=True),
        sa.Column("leader_epoch", sa.BigInteger(), nullable=False),
        sa.Column("last_cycle_at", DATETIME, nullable=True),
        sa.Column("last_sweep_at", DATETIME, nullable=True),
        _pk("rm_state"),
        **TABLE_OPTIONS,
    )
    _seed(state)


def _configuration_tables() -> None:
    op.create_table(
        "rm_descriptors",
        sa.Column("name", NAME, nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("units", JSON_TEXT, nullable=False),
        sa.Column("default_unit", sa.String(64), nullable=True),
        sa.Column("attributes", JSON_TEXT, nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("stock", sa.Boolean(), nullable=False),
        *_created(),
        _pk("rm_descriptors", "name"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "rm_pools",
        sa.Column("id", UUID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("attributes", JSON_TEXT, nullable=False),
        sa.Column("concurrency_limit", sa.Integer(), nullable=True),
        sa.Column("target_settings", JSON_TEXT, nullable=False),
        sa.Column("fair_sharing", sa.Boolean(), nullable=False),
        *_created(),
        _pk("rm_pools"),
        _uq("rm_pools", "name"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "rm_capacity_classes",
        sa.Column("pool_id", UUID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("capacity", JSON_TEXT, nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("reclaimable", SHORT, nullable=False),
        sa.Column("attributes", JSON_TEXT, nullable=False),
        sa.Column("concurrency_limit", sa.Integer(), nullable=True),
        sa.Column("target_settings", JSON_TEXT, nullable=False),
        _pk("rm_capacity_classes", "pool_id", "name"),
        _fk("rm_capacity_classes", "pool_id", "rm_pools"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "rm_policies",
        sa.Column("id", UUID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("pool_id", UUID, nullable=False),
        sa.Column("subject_selector", JSON_TEXT, nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("priority_lane", sa.Boolean(), nullable=False),
        sa.Column("preemption_group", KEY, nullable=True),
        sa.Column("concurrency_limit", sa.Integer(), nullable=True),
        sa.Column("target_settings", JSON_TEXT, nullable=False),
        sa.Column("fair_share_weight", sa.Integer(), nullable=False),
        *_created(),
        _pk("rm_policies"),
        _uq("rm_policies", "name"),
        _fk("rm_policies", "pool_id", "rm_pools"),
        **TABLE_OPTIONS,
    )
    _index("rm_policies", "pool_id")
    op.create_table(
        "rm_grants",
        sa.Column("policy_id", UUID, nullable=False),
        sa.Column("class_name", NAME, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("resources", JSON_TEXT, nullable=False),
        sa.Column("target_settings", JSON_TEXT, nullable=False),
        _pk("rm_grants", "policy_id", "class_name"),
        _fk("rm_grants", "policy_id", "rm_policies"),
        **TABLE_OPTIONS,
    )


def _request_tables() -> None:
    op.create_table(
        "rm_requests",
        sa.Column("id", UUID, nullable=False),
        sa.Column("requester", KEY, nullable=False),
        sa.Column("status", SHORT, nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column("runtime_state", SHORT, nullable=False),
        sa.Column("reclaim_tolerance", SHORT, nullable=False),
        sa.Column("pool", KEY, nullable=True),
        sa.Column("pool_selector", JSON_TEXT, nullable=True),
        sa.Column("preemption_group", JSON_TEXT, nullable=True),
        sa.Column("pool_id", UUID, nullable=True),
        sa.Column("created_at", DATETIME, nullable=False),
        sa.Column("lease_expires_at", DATETIME, nullable=True),
        sa.Column("allocation_deadline", DATETIME, nullable=True),
        sa.Column("renewed_at", DATETIME, nullable=True),
        sa.Column("allocated_at", DATETIME, nullable=True),
        sa.Column("released_at", DATETIME, nullable=True),
        sa.Column("preemption_initiated_by_id", UUID, nullable=True),
        sa.Column("lapse_at", DATETIME, nullable=True),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        _pk("rm_requests"),
        **TABLE_OPTIONS,
    )
    for columns in (
        ("status",),
        ("seq",),
        ("lapse_at",),
        ("pool_id", "status"),
        ("requester",),
        ("created_at",),
    ):
        _index("rm_requests", *columns)
    op.create_table(
        "rm_request_demands",
        sa.Column("request_id", UUID, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("resource", NAME, nullable=True),
        sa.Column("kind", sa.String(64), nullable=True),
        sa.Column("resource_selector", JSON_TEXT, nullable=True),
        sa.Column("quantity", sa.BigInteger(), nullable=False),
        sa.Column("unit", sa.String(64), nullable=True),
        sa.Column("class_name", NAME, nullable=True),
        sa.Column("class_selector", JSON_TEXT, nullable=True),
        _pk("rm_request_demands", "request_id", "position"),
        _fk("rm_request_demands", "request_id", "rm_requests"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "rm_request_subjects",
        sa.Column("request_id", UUID, nullable=False),
        sa.Column("chain", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("position", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("subject_type", SHORT, nullable=False),
        sa.Column("subject_id", KEY, nullable=False),
        sa.Column("attributes", JSON_TEXT, nullable=False),
        sa.Column("metadata", JSON_TEXT, nullable=False),
        _pk("rm_request_subjects", "request_id", "chain", "position"),
        _fk("rm_request_subjects", "request_id", "rm_requests"),
        **TABLE_OPTIONS,
    )
    _index("rm_request_subjects", "subject_id", "subject_type")
    op.create_table(
        "rm_request_metadata",
        sa.Column("request_id", UUID, nullable=False),
        sa.Column("key", KEY, nullable=False),
        sa.Column("value", KEY, nullable=False),
        _pk("rm_request_metadata", "request_id", "key"),
        _fk("rm_request_metadata", "request_id", "rm_requests"),
        **TABLE_OPTIONS,
    )
    _index("rm_request_metadata", "key", "value")
    op.create_table(
        "rm_allocations",
        sa.Column("id", UUID, nullable=False),
        sa.Column("request_id", UUID, nullable=False),
        sa.Column("demand_index", sa.Integer(), nullable=True),
        sa.Column("pool_id", UUID, nullable=False),
        sa.Column("class_name", NAME, nullable=False),
        sa.Column("resource", NAME, nullable=False),
        sa.Column("resource_kind", sa.String(64), nullable=False),
        sa.Column("quantity", sa.BigInteger(), nullable=False),
        sa.Column("unit", sa.String(64), nullable=False),
        sa.Column("base_quantity", sa.BigInteger(), nullable=False),
        sa.Column("policy_id", UUID, nullable=False),
        sa.Column("priority", sa.BigInteger(), nullable=False),
        sa.Column("priority_lane", sa.Boolean(), nullable=False),
        sa.Column("target_settings", JSON_TEXT, nullable=False),
        _pk("rm_allocations"),
        _fk("rm_allocations", "request_id", "rm_requests"),
        **TABLE_OPTIONS,
    )
    _index("rm_allocations", "request_id")
    _index("rm_allocations", "pool_id")


def _seed(state: sa.Table) -> None:
    now = datetime.now(UTC)
    if op.get_bind().dialect.name != "postgresql":
        now = now.replace(tzinfo=None)  # SQLite and MySQL columns hold naive UTC
    descriptors = sa.table(
        "rm_descriptors",
        sa.column("name", NAME),
        sa.column("kind", sa.String(64)),
        sa.column("units", JSON_TEXT),
        sa.column("default_unit", sa.String(64)),
        sa.column("attributes", JSON_TEXT),
        sa.column("description", sa.Text()),
        sa.column("stock", sa.Boolean()),
        sa.column("created", DATETIME),
        sa.column("updated", DATETIME),
    )
    op.bulk_insert(
        descriptors,
        [
            {
                **item,
                "units": json.dumps(item["units"], separators=(",", ":")),
                "attributes": "{}",
                "stock": True,
                "created": now,
                "updated": now,
            }
            for item in STOCK_DESCRIPTORS
        ],
    )
    op.bulk_insert(
        state,
        [
            {
                "id": 1,
                "state_version": 0,
                "config_version": 0,
                "leader_id": None,
                "leader_epoch": 0,
                "last_cycle_at": None,
                "last_sweep_at": None,
            }
        ],
    )


def downgrade() -> None:
    for table in (
        "rm_state",
        "rm_idempotency_keys",
        "rm_allocations",
        "rm_request_metadata",
        "rm_request_subjects",
        "rm_request_demands",
        "rm_requests",
        "rm_grants",
        "rm_policies",
        "rm_capacity_classes",
        "rm_pools",
        "rm_descriptors",
    ):
        op.drop_table(table)
