"""Step runs: heartbeat deadline, compiled spec, logs URI and process id.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

Adds nullable columns to ``step_run`` (no backfill: steps that beat before this revision have no
deadline and are never swept) and the ``heartbeat_deadline`` index of the lost-heartbeat sweep.
Written by hand to match ``wharf/store/sql/tables.py``, with SQLAlchemy types only.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

_MYSQL = ("mysql", "mariadb")
DATETIME = sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), *_MYSQL)
JSON_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), *_MYSQL)

_TABLE = "step_run"
_INDEX = "ix_step_run_heartbeat_deadline"


def _columns() -> list[sa.Column[Any]]:
    """``heartbeat_deadline`` (when the step counts as lost without a new heartbeat; NULL once its
    status is final), ``spec`` (its ``StepSpec`` as JSON text), ``logs_uri`` (where its captured
    output is stored) and ``pid`` (the process id of an isolated step)."""
    return [
        sa.Column("heartbeat_deadline", DATETIME, nullable=True),
        sa.Column("spec", JSON_TEXT, nullable=True),
        sa.Column("logs_uri", sa.Text(), nullable=True),
        sa.Column("pid", sa.Integer(), nullable=True),
    ]


def upgrade() -> None:
    for column in _columns():
        op.add_column(_TABLE, column)
    op.create_index(_INDEX, _TABLE, ["heartbeat_deadline"])


def downgrade() -> None:
    """Plain ``DROP COLUMN`` on every backend (SQLite >= 3.35 drops columns in place), the index
    first because SQLite refuses to drop an indexed column: no table is copied and no foreign
    key is touched."""
    op.drop_index(_INDEX, table_name=_TABLE)
    for column in reversed(_columns()):
        op.drop_column(_TABLE, column.name)
