"""The metadata store's schema as SQLAlchemy Core tables: the single source of truth.

``migrations/versions`` must create exactly this schema (a test runs Alembic's autogenerate
comparison against every backend). Invariants kept by the database itself:
- names are unique where users address things by name (users, projects, stacks, components per
  type, pipelines / artifacts / schedules per project);
- a run is unique per (snapshot, orchestrator run id), an artifact version per (artifact,
  version), a step run per (run, name, attempt), so concurrent writers cannot duplicate them;
- every reference is a foreign key (except ``artifact_version.artifact_store_id``), and every
  foreign key column is indexed (MySQL would otherwise add its own, unlike the migrations);
- enumerations are short strings, never database enums (a new status needs no migration);
  constraint and index names and the MySQL/MariaDB table options come from
  :mod:`wharf.sql.conventions`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from wharf.sql.conventions import TABLE_OPTIONS, new_metadata
from wharf.sql.types import LONG_TEXT, UUID, JsonText, NullableJsonText, UtcDateTime

NAME_LENGTH = 255
STATUS_LENGTH = 32

metadata = new_metadata()


def _id() -> Column[Any]:
    return Column("id", UUID, primary_key=True)


def _created() -> Column[Any]:
    return Column("created", UtcDateTime(), nullable=False)


def _fk(
    name: str, target: str, *, nullable: bool = False, primary_key: bool = False
) -> Column[Any]:
    return Column(name, UUID, ForeignKey(target), nullable=nullable, primary_key=primary_key)


user_account = Table(
    "user_account",
    metadata,
    _id(),
    Column("name", String(NAME_LENGTH), nullable=False),
    Column("is_admin", Boolean(), nullable=False),
    _created(),
    UniqueConstraint("name"),
    **TABLE_OPTIONS,
)

project = Table(
    "project",
    metadata,
    _id(),
    Column("name", String(NAME_LENGTH), nullable=False),
    _created(),
    UniqueConstraint("name"),
    **TABLE_OPTIONS,
)

component = Table(
    "component",
    metadata,
    _id(),
    Column("name", String(NAME_LENGTH), nullable=False),
    Column("type", String(STATUS_LENGTH), nullable=False),
    Column("flavor", String(NAME_LENGTH), nullable=False),
    Column("configuration", JsonText(), nullable=False),
    _created(),
    UniqueConstraint("type", "name"),
    **TABLE_OPTIONS,
)

stack = Table(
    "stack",
    metadata,
    _id(),
    Column("name", String(NAME_LENGTH), nullable=False),
    _created(),
    UniqueConstraint("name"),
    **TABLE_OPTIONS,
)

stack_component = Table(
    "stack_component",
    metadata,
    _fk("stack_id", "stack.id", primary_key=True),
    Column("component_type", String(STATUS_LENGTH), primary_key=True),
    _fk("component_id", "component.id"),
    Index(None, "component_id"),
    **TABLE_OPTIONS,
)

pipeline = Table(
    "pipeline",
    metadata,
    _id(),
    _fk("project_id", "project.id"),
    Column("name", String(NAME_LENGTH), nullable=False),
    _created(),
    UniqueConstraint("project_id", "name"),
    **TABLE_OPTIONS,
)

pipeline_snapshot = Table(
    "pipeline_snapshot",
    metadata,
    _id(),
    _fk("project_id", "project.id"),
    _fk("pipeline_id", "pipeline.id"),
    _fk("stack_id", "stack.id", nullable=True),
    Column("spec", JsonText(), nullable=False),
    _created(),
    Index(None, "project_id"),
    Index(None, "pipeline_id"),
    Index(None, "stack_id"),
    **TABLE_OPTIONS,
)

pipeline_run = Table(
    "pipeline_run",
    metadata,
    _id(),
    _fk("project_id", "project.id"),
    _fk("pipeline_id", "pipeline.id"),
    _fk("snapshot_id", "pipeline_snapshot.id"),
    _fk("user_id", "user_account.id", nullable=True),
    Column("name", String(NAME_LENGTH), nullable=False),
    Column("status", String(STATUS_LENGTH), nullable=False),
    Column("status_reason", Text(), nullable=True),
    Column("orchestrator_run_id", String(NAME_LENGTH), nullable=True),
    Column("start_time", UtcDateTime(), nullable=True),
    Column("end_time", UtcDateTime(), nullable=True),
    _created(),
    Column("updated", UtcDateTime(), nullable=False),
    # The orchestrating process and its liveness (0006): see ``run_liveness``.
    Column("orchestrator_host", String(NAME_LENGTH), nullable=True),
    Column("orchestrator_pid", Integer(), nullable=True),
    Column("orchestrator_start", String(NAME_LENGTH), nullable=True),
    Column("last_heartbeat", UtcDateTime(), nullable=True),
    Column("heartbeat_deadline", UtcDateTime(), nullable=True),
    Column("stop_forced", Boolean(), nullable=True),
    # NULL ids never collide; this makes ``RunRepository.get_or_create`` race-safe.
    UniqueConstraint("snapshot_id", "orchestrator_run_id"),
    Index(None, "project_id", "created"),
    Index(None, "pipeline_id"),
    Index(None, "user_id"),
    Index(None, "created"),
    Index(None, "heartbeat_deadline"),  # the sweep: runs past their deadline
    Index(None, "orchestrator_host", "heartbeat_deadline"),  # the sweep: this host's runs
    **TABLE_OPTIONS,
)

step_run = Table(
    "step_run",
    metadata,
    _id(),
    _fk("project_id", "project.id"),
    _fk("run_id", "pipeline_run.id"),
    Column("name", String(NAME_LENGTH), nullable=False),
    Column("status", String(STATUS_LENGTH), nullable=False),
    Column("status_reason", Text(), nullable=True),
    Column("attempt", Integer(), nullable=False),
    Column("cache_key", String(NAME_LENGTH), nullable=True),
    Column("cache_expires_at", UtcDateTime(), nullable=True),
    _fk("original_step_run_id", "step_run.id", nullable=True),
    Column("code_hash", String(NAME_LENGTH), nullable=True),
    Column("source_code", LONG_TEXT, nullable=True),
    Column("docstring", LONG_TEXT, nullable=True),
    Column("parameters", JsonText(), nullable=False),
    Column("start_time", UtcDateTime(), nullable=True),
    Column("end_time", UtcDateTime(), nullable=True),
    Column("last_heartbeat", UtcDateTime(), nullable=True),
    Column("heartbeat_deadline", UtcDateTime(), nullable=True),
    Column("spec", NullableJsonText(), nullable=True),
    Column("logs_uri", Text(), nullable=True),
    Column("pid", Integer(), nullable=True),
    Column("pid_host", String(NAME_LENGTH), nullable=True),
    Column("pid_start", String(NAME_LENGTH), nullable=True),
    Column("resource_request_id", UUID, nullable=True),
    Column("runtime", String(STATUS_LENGTH), nullable=True),
    Column("calls", NullableJsonText(), nullable=True),
    _created(),
    Column("updated", UtcDateTime(), nullable=False),
    UniqueConstraint("run_id", "name", "attempt"),
    Index(None, "project_id", "cache_key", "status", "created", "id"),  # the cache lookup
    Index(None, "original_step_run_id"),
    Index(None, "created"),
    # The lost-heartbeat sweep's range scan: the store clears the deadline when a step's status
    # becomes final, so the range holds live steps only. No other query has a deadline
    # condition, so the planners never pick it for the hot-path lookups (an index leading with
    # ``status`` would tempt SQLite, which has no statistics, away from the cache-key and run-id
    # indexes).
    Index(None, "heartbeat_deadline"),
    **TABLE_OPTIONS,
)


def _step_link_table(name: str) -> Table:
    return Table(
        name,
        metadata,
        _fk("step_run_id", "step_run.id", primary_key=True),
        Column("name", String(NAME_LENGTH), primary_key=True),
        _fk("artifact_version_id", "artifact_version.id"),
        Index(None, "artifact_version_id"),
        **TABLE_OPTIONS,
    )


step_run_input = _step_link_table("step_run_input")
step_run_output = _step_link_table("step_run_output")

artifact = Table(
    "artifact",
    metadata,
    _id(),
    _fk("project_id", "project.id"),
    Column("name", String(NAME_LENGTH), nullable=False),
    _created(),
    UniqueConstraint("project_id", "name"),
    **TABLE_OPTIONS,
)

artifact_version = Table(
    "artifact_version",
    metadata,
    _id(),
    _fk("artifact_id", "artifact.id"),
    _fk("project_id", "project.id"),
    Column("version", Integer(), nullable=False),
    Column("uri", Text(), nullable=False),
    Column("data_type", Text(), nullable=False),
    Column("materializer", Text(), nullable=False),
    Column("content_hash", String(NAME_LENGTH), nullable=True),
    _fk("producer_step_run_id", "step_run.id", nullable=True),
    # Not a foreign key: artifact stores may be configured outside the store.
    Column("artifact_store_id", UUID, nullable=True),
    _created(),
    UniqueConstraint("artifact_id", "version"),
    Index(None, "project_id", "created"),
    Index(None, "producer_step_run_id"),
    **TABLE_OPTIONS,
)

run_metadata = Table(
    "run_metadata",
    metadata,
    _id(),
    Column("resource_type", String(STATUS_LENGTH), nullable=False),
    Column("resource_id", UUID, nullable=False),
    Column("key", String(NAME_LENGTH), nullable=False),
    Column("value", JsonText(), nullable=False),
    _created(),
    UniqueConstraint("resource_type", "resource_id", "key"),
    **TABLE_OPTIONS,
)

schedule = Table(
    "schedule",
    metadata,
    _id(),
    _fk("project_id", "project.id"),
    _fk("pipeline_id", "pipeline.id"),
    _fk("snapshot_id", "pipeline_snapshot.id"),
    Column("name", String(NAME_LENGTH), nullable=False),
    Column("cron_expression", String(NAME_LENGTH), nullable=True),
    Column("interval_seconds", Integer(), nullable=True),
    Column("run_once_start_time", UtcDateTime(), nullable=True),
    Column("start_time", UtcDateTime(), nullable=True),
    Column("end_time", UtcDateTime(), nullable=True),
    Column("catchup", Boolean(), nullable=False),
    Column("active", Boolean(), nullable=False),
    _created(),
    UniqueConstraint("project_id", "name"),
    Index(None, "pipeline_id"),
    Index(None, "snapshot_id"),
    **TABLE_OPTIONS,
)

# ----------------------------------------------------------------------------- accounts (0003)
# Login data of users, service accounts, their API keys and project memberships (the workspace
# server's; the embedded store leaves them empty). A membership names either a user or a
# service account: NULLs never collide in the unique constraints, so each principal has at
# most one role per project.

user_credential = Table(
    "user_credential",
    metadata,
    _fk("user_id", "user_account.id", primary_key=True),
    Column("password_hash", Text(), nullable=True),
    Column("external_id", String(NAME_LENGTH), nullable=True),
    Column("active", Boolean(), nullable=False),
    Column("token_generation", Integer(), nullable=False),
    Column("updated", UtcDateTime(), nullable=False),
    UniqueConstraint("external_id"),
    **TABLE_OPTIONS,
)

service_account = Table(
    "service_account",
    metadata,
    _id(),
    Column("name", String(NAME_LENGTH), nullable=False),
    Column("description", Text(), nullable=True),
    Column("is_admin", Boolean(), nullable=False),
    Column("active", Boolean(), nullable=False),
    _created(),
    UniqueConstraint("name"),
    **TABLE_OPTIONS,
)

api_key = Table(
    "api_key",
    metadata,
    _id(),
    _fk("service_account_id", "service_account.id"),
    Column("name", String(NAME_LENGTH), nullable=False),
    Column("key_hash", String(64), nullable=False),
    _created(),
    Column("last_used", UtcDateTime(), nullable=True),
    Column("revoked_at", UtcDateTime(), nullable=True),
    UniqueConstraint("service_account_id", "name"),
    **TABLE_OPTIONS,
)

project_member = Table(
    "project_member",
    metadata,
    _id(),
    _fk("project_id", "project.id"),
    _fk("user_id", "user_account.id", nullable=True),
    _fk("service_account_id", "service_account.id", nullable=True),
    Column("role", String(STATUS_LENGTH), nullable=False),
    _created(),
    UniqueConstraint("project_id", "user_id"),
    UniqueConstraint("project_id", "service_account_id"),
    Index(None, "user_id"),
    Index(None, "service_account_id"),
    **TABLE_OPTIONS,
)
