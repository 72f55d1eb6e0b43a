"""Pipeline runs: the orchestrating process and its heartbeat; step pids with host and start.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03

Adds nullable columns to ``pipeline_run`` (existing rows need no backfill and are never swept)
with the indexes of the lost-orchestrator sweep, and ``pid_host`` / ``pid_start`` to
``step_run``. Written by hand to match ``wharf/store/sql/tables.py``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None

_MYSQL = ("mysql", "mariadb")
DATETIME = sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), *_MYSQL)
_INDEX = "ix_pipeline_run_heartbeat_deadline"
_HOST_INDEX = "ix_pipeline_run_orchestrator_host_heartbeat_deadline"


def _run_columns() -> list[sa.Column[Any]]:
    """The process that runs the run (host name, pid, start token of
    ``wharf.store.process_identity``), its liveness (``last_heartbeat``, ``heartbeat_deadline``:
    NULL once the run has finished), and ``stop_forced`` (a forced stop asks the orchestrating
    process to kill its steps' processes)."""
    return [
        sa.Column("orchestrator_host", sa.String(255), nullable=True),
        sa.Column("orchestrator_pid", sa.Integer(), nullable=True),
        sa.Column("orchestrator_start", sa.String(255), nullable=True),
        sa.Column("last_heartbeat", DATETIME, nullable=True),
        sa.Column("heartbeat_deadline", DATETIME, nullable=True),
        sa.Column("stop_forced", sa.Boolean(), nullable=True),
    ]


def _step_columns() -> list[sa.Column[Any]]:
    """The host and start token that name the process a step's ``pid`` means."""
    return [
        sa.Column("pid_host", sa.String(255), nullable=True),
        sa.Column("pid_start", sa.String(255), nullable=True),
    ]


def upgrade() -> None:
    for column in _run_columns():
        op.add_column("pipeline_run", column)
    op.create_index(_INDEX, "pipeline_run", ["heartbeat_deadline"])
    op.create_index(_HOST_INDEX, "pipeline_run", ["orchestrator_host", "heartbeat_deadline"])
    for column in _step_columns():
        op.add_column("step_run", column)


def downgrade() -> None:
    """Plain ``DROP COLUMN`` on every backend, the indexes first: SQLite refuses to drop an
    indexed column."""
    for column in reversed(_step_columns()):
        op.drop_column("step_run", column.name)
    op.drop_index(_HOST_INDEX, table_name="pipeline_run")
    op.drop_index(_INDEX, table_name="pipeline_run")
    for column in reversed(_run_columns()):
        op.drop_column("pipeline_run", column.name)
