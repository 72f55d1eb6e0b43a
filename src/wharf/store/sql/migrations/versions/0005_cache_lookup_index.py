"""The cache lookup's index covers the status and creation time.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

``(project_id, cache_key, status, created, id)`` replaces ``(project_id, cache_key)``, so the
lookup reaches the newest completed step run directly instead of also reading every step run
that reused it. Written by hand to match ``wharf/store/sql/tables.py``.
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

OLD = "ix_step_run_project_id_cache_key"
NEW = "ix_step_run_project_id_cache_key_status_created_id"


def upgrade() -> None:
    """The new index is created before the old one is dropped: MySQL needs an index that starts
    with ``project_id`` for its foreign key at every moment."""
    with op.batch_alter_table("step_run") as batch:
        batch.create_index(NEW, ["project_id", "cache_key", "status", "created", "id"])
        batch.drop_index(OLD)


def downgrade() -> None:
    with op.batch_alter_table("step_run") as batch:
        batch.create_index(OLD, ["project_id", "cache_key"])
        batch.drop_index(NEW)
