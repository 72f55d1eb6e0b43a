"""Step runs: the dynamic pipeline call order known when each was created (``calls``).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06

Adds the nullable JSON text column ``step_run.calls`` (position in the pipeline function's
calls -> invocation id), written with the step run (no write of its own); a resumed dynamic run
checks its replayed calls against it. Existing rows need no backfill: NULL means no recorded
positions (their run is checked as before). Written by hand to match
``wharf/store/sql/tables.py``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None

_MYSQL = ("mysql", "mariadb")
JSON_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), *_MYSQL)


def upgrade() -> None:
    op.add_column("step_run", sa.Column("calls", JSON_TEXT, nullable=True))


def downgrade() -> None:
    op.drop_column("step_run", "calls")
