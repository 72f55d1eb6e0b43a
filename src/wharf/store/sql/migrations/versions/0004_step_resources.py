"""Step resources: a step run's Resource Manager request id and its runtime.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Two nullable columns on ``step_run``; existing rows keep NULL (no request, runtime unknown).
Written by hand to match ``wharf/store/sql/tables.py``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None

UUID = sa.Uuid().with_variant(sa.Uuid(native_uuid=False), "mysql", "mariadb")


def upgrade() -> None:
    with op.batch_alter_table("step_run") as batch:
        batch.add_column(sa.Column("resource_request_id", UUID, nullable=True))
        batch.add_column(sa.Column("runtime", sa.String(32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("step_run") as batch:
        batch.drop_column("runtime")
        batch.drop_column("resource_request_id")
