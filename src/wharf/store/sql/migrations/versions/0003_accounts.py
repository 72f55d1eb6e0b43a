"""Accounts: user credentials, service accounts, API keys and project memberships.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

Four new tables used by the workspace server only (the embedded store leaves them empty), so
no existing row is touched and the downgrade just drops them (children first).

Written by hand to match ``wharf/store/sql/tables.py``; like every migration it uses only
SQLAlchemy types.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

_MYSQL = ("mysql", "mariadb")
DATETIME = sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), *_MYSQL)
UUID = sa.Uuid().with_variant(sa.Uuid(native_uuid=False), *_MYSQL)
NAME = sa.String(255)
STATUS = sa.String(32)
TABLE_OPTIONS: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}


def _pk(table: str, *columns: str) -> sa.PrimaryKeyConstraint:
    return sa.PrimaryKeyConstraint(*(columns or ("id",)), name=f"pk_{table}")


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [f"{target}.id"], name=f"fk_{table}_{column}_{target}")


def _uq(table: str, *columns: str) -> sa.UniqueConstraint:
    return sa.UniqueConstraint(*columns, name=f"uq_{table}_{'_'.join(columns)}")


def upgrade() -> None:
    op.create_table(
        "user_credential",
        sa.Column("user_id", UUID, nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=True),
        sa.Column("external_id", NAME, nullable=True),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("token_generation", sa.Integer(), nullable=False),
        sa.Column("updated", DATETIME, nullable=False),
        _pk("user_credential", "user_id"),
        _fk("user_credential", "user_id", "user_account"),
        _uq("user_credential", "external_id"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "service_account",
        sa.Column("id", UUID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("created", DATETIME, nullable=False),
        _pk("service_account"),
        _uq("service_account", "name"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "api_key",
        sa.Column("id", UUID, nullable=False),
        sa.Column("service_account_id", UUID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("created", DATETIME, nullable=False),
        sa.Column("last_used", DATETIME, nullable=True),
        sa.Column("revoked_at", DATETIME, nullable=True),
        _pk("api_key"),
        _fk("api_key", "service_account_id", "service_account"),
        _uq("api_key", "service_account_id", "name"),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "project_member",
        sa.Column("id", UUID, nullable=False),
        sa.Column("project_id", UUID, nullable=False),
        sa.Column("user_id", UUID, nullable=True),
        sa.Column("service_account_id", UUID, nullable=True),
        sa.Column("role", STATUS, nullable=False),
        sa.Column("created", DATETIME, nullable=False),
        _pk("project_member"),
        _fk("project_member", "project_id", "project"),
        _fk("project_member", "user_id", "user_account"),
        _fk("project_member", "service_account_id", "service_account"),
        _uq("project_member", "project_id", "user_id"),
        _uq("project_member", "project_id", "service_account_id"),
        **TABLE_OPTIONS,
    )
    op.create_index("ix_project_member_user_id", "project_member", ["user_id"])
    op.create_index(
        "ix_project_member_service_account_id", "project_member", ["service_account_id"]
    )


def downgrade() -> None:
    for table in ("project_member", "api_key", "service_account", "user_credential"):
        op.drop_table(table)
