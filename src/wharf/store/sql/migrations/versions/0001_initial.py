"""Initial schema of the metadata store.

Revision ID: 0001
Revises:
Create Date: 2024-06-01

Written by hand to match ``wharf/store/sql/tables.py`` (a test compares them on every backend).
Migrations are frozen history: they use only SQLAlchemy types, never Wharf's own, so later
changes to ``tables.py`` cannot change what an old migration creates.
"""

from __future__ import annotations

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
LONG_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), *_MYSQL)
JSON_TEXT = LONG_TEXT
UUID = sa.Uuid().with_variant(sa.Uuid(native_uuid=False), *_MYSQL)
NAME = sa.String(255)
STATUS = sa.String(32)
TABLE_OPTIONS: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}


def _id() -> sa.Column[Any]:
    return sa.Column("id", UUID, nullable=False)


def _pk(table: str, *columns: str) -> sa.PrimaryKeyConstraint:
    return sa.PrimaryKeyConstraint(*(columns or ("id",)), name=f"pk_{table}")


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [f"{target}.id"], name=f"fk_{table}_{column}_{target}")


def _uq(table: str, *columns: str) -> sa.UniqueConstraint:
    return sa.UniqueConstraint(*columns, name=f"uq_{table}_{'_'.join(columns)}")


def _index(table: str, *columns: str) -> None:
    op.create_index(f"ix_{table}_{'_'.join(columns)}", table, list(columns))


def upgrade() -> None:
    op.create_table(
        "user_account",
        _id(),
        sa.Column("name", NAME, nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("created", DATETIME, nullable=False),
        _pk("user_account"),
        _uq("user_account", "name"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "project",
        _id(),
        sa.Column("name", NAME, nullable=False),
        sa.Column("created", DATETIME, nullable=False),
        _pk("project"),
        _uq("project", "name"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "component",
        _id(),
        sa.Column("name", NAME, nullable=False),
        sa.Column("type", STATUS, nullable=False),
        sa.Column("flavor", NAME, nullable=False),
        sa.Column("configuration", JSON_TEXT, nullable=False),
        sa.Column("created", DATETIME, nullable=False),
        _pk("component"),
        _uq("component", "type", "name"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "stack",
        _id(),
        sa.Column("name", NAME, nullable=False),
        sa.Column("created", DATETIME, nullable=False),
        _pk("stack"),
        _uq("stack", "name"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "stack_component",
        sa.Column("stack_id", UUID, nullable=False),
        sa.Column("component_type", STATUS, nullable=False),
        sa.Column("component_id", UUID, nullable=False),
        _pk("stack_component", "stack_id", "component_type"),
        _fk("stack_component", "stack_id", "stack"),
        _fk("stack_component", "component_id", "component"),
        **TABLE_OPTIONS,
    )
    _index("stack_component", "component_id")

    op.create_table(
        "pipeline",
        _id(),
        sa.Column("project_id", UUID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("created", DATETIME, nullable=False),
        _pk("pipeline"),
        _fk("pipeline", "project_id", "project"),
        _uq("pipeline", "project_id", "name"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "pipeline_snapshot",
        _id(),
        sa.Column("project_id", UUID, nullable=False),
        sa.Column("pipeline_id", UUID, nullable=False),
        sa.Column("stack_id", UUID, nullable=True),
        sa.Column("spec", JSON_TEXT, nullable=False),
        sa.Column("created", DATETIME, nullable=False),
        _pk("pipeline_snapshot"),
        _fk("pipeline_snapshot", "project_id", "project"),
        _fk("pipeline_snapshot", "pipeline_id", "pipeline"),
        _fk("pipeline_snapshot", "stack_id", "stack"),
        **TABLE_OPTIONS,
    )
    _index("pipeline_snapshot", "project_id")
    _index("pipeline_snapshot", "pipeline_id")
    _index("pipeline_snapshot", "stack_id")

    op.create_table(
        "pipeline_run",
        _id(),
        sa.Column("project_id", UUID, nullable=False),
        sa.Column("pipeline_id", UUID, nullable=False),
        sa.Column("snapshot_id", UUID, nullable=False),
        sa.Column("user_id", UUID, nullable=True),
        sa.Column("name", NAME, nullable=False),
        sa.Column("status", STATUS, nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column("orchestrator_run_id", NAME, nullable=True),
        sa.Column("start_time", DATETIME, nullable=True),
        sa.Column("end_time", DATETIME, nullable=True),
        sa.Column("created", DATETIME, nullable=False),
        sa.Column("updated", DATETIME, nullable=False),
        _pk("pipeline_run"),
        _fk("pipeline_run", "project_id", "project"),
        _fk("pipeline_run", "pipeline_id", "pipeline"),
        _fk("pipeline_run", "snapshot_id", "pipeline_snapshot"),
        _fk("pipeline_run", "user_id", "user_account"),
        _uq("pipeline_run", "snapshot_id", "orchestrator_run_id"),
        **TABLE_OPTIONS,
    )
    _index("pipeline_run", "project_id", "created")
    _index("pipeline_run", "pipeline_id")
    _index("pipeline_run", "user_id")
    _index("pipeline_run", "created")

    op.create_table(
        "step_run",
        _id(),
        sa.Column("project_id", UUID, nullable=False),
        sa.Column("run_id", UUID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("status", STATUS, nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("cache_key", NAME, nullable=True),
        sa.Column("cache_expires_at", DATETIME, nullable=True),
        sa.Column("original_step_run_id", UUID, nullable=True),
        sa.Column("code_hash", NAME, nullable=True),
        sa.Column("source_code", LONG_TEXT, nullable=True),
        sa.Column("docstring", LONG_TEXT, nullable=True),
        sa.Column("parameters", JSON_TEXT, nullable=False),
        sa.Column("start_time", DATETIME, nullable=True),
        sa.Column("end_time", DATETIME, nullable=True),
        sa.Column("last_heartbeat", DATETIME, nullable=True),
        sa.Column("created", DATETIME, nullable=False),
        sa.Column("updated", DATETIME, nullable=False),
        _pk("step_run"),
        _fk("step_run", "project_id", "project"),
        _fk("step_run", "run_id", "pipeline_run"),
        _fk("step_run", "original_step_run_id", "step_run"),
        _uq("step_run", "run_id", "name", "attempt"),
        **TABLE_OPTIONS,
    )
    _index("step_run", "project_id", "cache_key")
    _index("step_run", "original_step_run_id")
    _index("step_run", "created")

    op.create_table(
        "artifact",
        _id(),
        sa.Column("project_id", UUID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("created", DATETIME, nullable=False),
        _pk("artifact"),
        _fk("artifact", "project_id", "project"),
        _uq("artifact", "project_id", "name"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "artifact_version",
        _id(),
        sa.Column("artifact_id", UUID, nullable=False),
        sa.Column("project_id", UUID, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("uri", sa.Text(), nullable=False),
        sa.Column("data_type", sa.Text(), nullable=False),
        sa.Column("materializer", sa.Text(), nullable=False),
        sa.Column("content_hash", NAME, nullable=True),
        sa.Column("producer_step_run_id", UUID, nullable=True),
        sa.Column("artifact_store_id", UUID, nullable=True),
        sa.Column("created", DATETIME, nullable=False),
        _pk("artifact_version"),
        _fk("artifact_version", "artifact_id", "artifact"),
        _fk("artifact_version", "project_id", "project"),
        _fk("artifact_version", "producer_step_run_id", "step_run"),
        _uq("artifact_version", "artifact_id", "version"),
        **TABLE_OPTIONS,
    )
    _index("artifact_version", "project_id", "created")
    _index("artifact_version", "producer_step_run_id")

    for link in ("step_run_input", "step_run_output"):
        op.create_table(
            link,
            sa.Column("step_run_id", UUID, nullable=False),
            sa.Column("name", NAME, nullable=False),
            sa.Column("artifact_version_id", UUID, nullable=False),
            _pk(link, "step_run_id", "name"),
            _fk(link, "step_run_id", "step_run"),
            _fk(link, "artifact_version_id", "artifact_version"),
            **TABLE_OPTIONS,
        )
        _index(link, "artifact_version_id")

    op.create_table(
        "run_metadata",
        _id(),
        sa.Column("resource_type", STATUS, nullable=False),
        sa.Column("resource_id", UUID, nullable=False),
        sa.Column("key", NAME, nullable=False),
        sa.Column("value", JSON_TEXT, nullable=False),
        sa.Column("created", DATETIME, nullable=False),
        _pk("run_metadata"),
        _uq("run_metadata", "resource_type", "resource_id", "key"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "schedule",
        _id(),
        sa.Column("project_id", UUID, nullable=False),
        sa.Column("pipeline_id", UUID, nullable=False),
        sa.Column("snapshot_id", UUID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("cron_expression", NAME, nullable=True),
        sa.Column("interval_seconds", sa.Integer(), nullable=True),
        sa.Column("run_once_start_time", DATETIME, nullable=True),
        sa.Column("start_time", DATETIME, nullable=True),
        sa.Column("end_time", DATETIME, nullable=True),
        sa.Column("catchup", sa.Boolean(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("created", DATETIME, nullable=False),
        _pk("schedule"),
        _fk("schedule", "project_id", "project"),
        _fk("schedule", "pipeline_id", "pipeline"),
        _fk("schedule", "snapshot_id", "pipeline_snapshot"),
        _uq("schedule", "project_id", "name"),
        **TABLE_OPTIONS,
    )
    _index("schedule", "pipeline_id")
    _index("schedule", "snapshot_id")


def downgrade() -> None:
    for table in (
        "schedule",
        "run_metadata",
        "step_run_output",
        "step_run_input",
        "artifact_version",
        "artifact",
        "step_run",
        "pipeline_run",
        "pipeline_snapshot",
        "pipeline",
        "stack_component",
        "stack",
        "component",
        "project",
        "user_account",
    ):
        op.drop_table(table)
