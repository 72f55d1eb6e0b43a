"""The Resource Manager's schema as SQLAlchemy Core tables: the single source of truth.

Every table is prefixed ``rm_`` and has its own :class:`MetaData` and Alembic history (version
table ``rm_alembic_version``), so the RM can share the embedded SQLite file with the workspace
store; ``migrations/versions`` must create exactly this schema (a test compares them). Column
types come from :mod:`wharf.sql.types` (quantities are exact integers in base units), names of
constraints and indexes and the MySQL table options from :mod:`wharf.sql.conventions`.

Invariants kept by the database: descriptor, pool and policy names are unique, capacity classes
per pool and grants per (policy, class); deleting a pool deletes its classes and policies, a
policy its grants; ``rm_state`` holds exactly one row (id 1); idempotency keys are unique per
(principal, operation, key). The meaning of ``rm_requests`` columns is noted at them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
)

from wharf.sql.conventions import TABLE_OPTIONS, new_metadata
from wharf.sql.types import UUID, JsonText, NullableJsonText, UtcDateTime

NAME_LENGTH = 128
"""Descriptor, pool, class and policy names (the domain's NAME_PATTERN allows 128)."""
KEY_LENGTH = 255
"""Subject ids, requesters, metadata keys and values, idempotency keys."""
SHORT = 32
"""Statuses and other enumerations."""
STATE_ROW_ID = 1

metadata = new_metadata()


def _fk(name: str, target: str, *, primary_key: bool = False) -> Column[Any]:
    return Column(
        name,
        UUID,
        ForeignKey(target, ondelete="CASCADE"),
        nullable=False,
        primary_key=primary_key,
    )


descriptors = Table(
    "rm_descriptors",
    metadata,
    Column("name", String(NAME_LENGTH), primary_key=True),
    Column("kind", String(64), nullable=False),
    Column("units", JsonText(), nullable=False),
    Column("default_unit", String(64), nullable=True),
    Column("attributes", JsonText(), nullable=False),
    Column("description", Text(), nullable=False),
    Column("stock", Boolean(), nullable=False),
    Column("created", UtcDateTime(), nullable=False),
    Column("updated", UtcDateTime(), nullable=False),
    **TABLE_OPTIONS,
)

pools = Table(
    "rm_pools",
    metadata,
    Column("id", UUID, primary_key=True),
    Column("name", String(NAME_LENGTH), nullable=False, unique=True),
    Column("rank", Integer(), nullable=False),
    Column("attributes", JsonText(), nullable=False),
    Column("concurrency_limit", Integer(), nullable=True),
    Column("target_settings", JsonText(), nullable=False),
    Column("fair_sharing", Boolean(), nullable=False),
    Column("created", UtcDateTime(), nullable=False),
    Column("updated", UtcDateTime(), nullable=False),
    **TABLE_OPTIONS,
)

capacity_classes = Table(
    "rm_capacity_classes",
    metadata,
    _fk("pool_id", "rm_pools.id", primary_key=True),
    Column("name", String(NAME_LENGTH), primary_key=True),
    Column("position", Integer(), nullable=False),
    Column("capacity", JsonText(), nullable=False),
    Column("rank", Integer(), nullable=False),
    Column("reclaimable", String(SHORT), nullable=False),
    Column("attributes", JsonText(), nullable=False),
    Column("concurrency_limit", Integer(), nullable=True),
    Column("target_settings", JsonText(), nullable=False),
    **TABLE_OPTIONS,
)

policies = Table(
    "rm_policies",
    metadata,
    Column("id", UUID, primary_key=True),
    Column("name", String(NAME_LENGTH), nullable=False, unique=True),
    _fk("pool_id", "rm_pools.id"),
    Column("subject_selector", JsonText(), nullable=False),
    Column("priority", Integer(), nullable=False),
    Column("priority_lane", Boolean(), nullable=False),
    Column("preemption_group", String(KEY_LENGTH), nullable=True),
    Column("concurrency_limit", Integer(), nullable=True),
    Column("target_settings", JsonText(), nullable=False),
    Column("fair_share_weight", Integer(), nullable=False),
    Column("created", UtcDateTime(), nullable=False),
    Column("updated", UtcDateTime(), nullable=False),
    Index(None, "pool_id"),
    **TABLE_OPTIONS,
)

grants = Table(
    "rm_grants",
    metadata,
    _fk("policy_id", "rm_policies.id", primary_key=True),
    Column("class_name", String(NAME_LENGTH), primary_key=True),
    Column("position", Integer(), nullable=False),
    Column("resources", JsonText(), nullable=False),
    Column("target_settings", JsonText(), nullable=False),
    **TABLE_OPTIONS,
)

requests = Table(
    "rm_requests",
    metadata,
    Column("id", UUID, primary_key=True),
    Column("requester", String(KEY_LENGTH), nullable=False),
    Column("status", String(SHORT), nullable=False),
    Column("status_reason", Text(), nullable=True),
    Column("runtime_state", String(SHORT), nullable=False),
    Column("reclaim_tolerance", String(SHORT), nullable=False),
    Column("pool", String(KEY_LENGTH), nullable=True),
    Column("pool_selector", NullableJsonText(), nullable=True),
    Column("preemption_group", NullableJsonText(), nullable=True),
    # The pool the request named (if any) and, once admitted, the pool that admitted it: a
    # pool's allocations are found through it.
    Column("pool_id", UUID, nullable=True),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("lease_expires_at", UtcDateTime(), nullable=True),
    Column("allocation_deadline", UtcDateTime(), nullable=True),
    Column("renewed_at", UtcDateTime(), nullable=True),
    Column("allocated_at", UtcDateTime(), nullable=True),
    Column("released_at", UtcDateTime(), nullable=True),
    Column("preemption_initiated_by_id", UUID, nullable=True),
    # The earliest instant a live request lapses (its lease, or for a pending request also its
    # allocation deadline); NULL once terminal, so the sweep reads only lapsed live requests.
    Column("lapse_at", UtcDateTime(), nullable=True),
    # The rm_state.state_version of the last scheduler-relevant change (creation, status,
    # allocations); each is made under the scheduling lock and bumps the version, so every
    # process refreshes its scheduling cache incrementally.
    Column("seq", BigInteger(), nullable=False),
    # Never NULL (see migration 0002 for why they are nullable). Demands are written with the
    # request, allocations once, at admission ("[]" before), referencing no pool or policy row
    # (history outlives them). Nothing selects requests by them, so they are JSON, not child
    # rows; subjects and metadata, which lists filter on, are rows of their own.
    Column("demands", JsonText(), nullable=True),
    Column("allocations", JsonText(), nullable=True),
    Index(None, "status"),
    Index(None, "seq"),
    Index(None, "lapse_at"),
    Index(None, "pool_id", "status"),
    Index(None, "requester"),
    Index(None, "created_at"),
    **TABLE_OPTIONS,
)

subjects = Table(
    "rm_request_subjects",
    metadata,
    _fk("request_id", "rm_requests.id", primary_key=True),
    Column("chain", Integer(), primary_key=True, autoincrement=False),
    Column("position", Integer(), primary_key=True, autoincrement=False),
    Column("subject_type", String(SHORT), nullable=False),
    Column("subject_id", String(KEY_LENGTH), nullable=False),
    Column("attributes", JsonText(), nullable=False),
    Column("metadata", JsonText(), nullable=False),
    Index(None, "subject_id", "subject_type"),
    **TABLE_OPTIONS,
)

request_metadata = Table(
    "rm_request_metadata",
    metadata,
    _fk("request_id", "rm_requests.id", primary_key=True),
    Column("key", String(KEY_LENGTH), primary_key=True),
    Column("value", String(KEY_LENGTH), nullable=False),
    Index(None, "key", "value"),
    **TABLE_OPTIONS,
)

idempotency_keys = Table(
    "rm_idempotency_keys",
    metadata,
    Column("principal", String(KEY_LENGTH), primary_key=True),
    Column("operation", String(64), primary_key=True),
    Column("key", String(KEY_LENGTH), primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("response", JsonText(), nullable=False),
    Column("created", UtcDateTime(), nullable=False),
    Index(None, "created"),
    **TABLE_OPTIONS,
)

state = Table(
    "rm_state",
    metadata,
    Column("id", Integer(), primary_key=True, autoincrement=False),
    Column("state_version", BigInteger(), nullable=False),
    Column("config_version", BigInteger(), nullable=False),
    Column("leader_id", String(64), nullable=True),
    Column("leader_epoch", BigInteger(), nullable=False),
    Column("last_cycle_at", UtcDateTime(), nullable=True),
    Column("last_sweep_at", UtcDateTime(), nullable=True),
    **TABLE_OPTIONS,
)
