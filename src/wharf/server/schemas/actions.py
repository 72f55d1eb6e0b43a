"""Request bodies. Every body forbids unknown fields; numbers and instants are bounded here so
that no value a client can send reaches the database as an overflow (which would be a 500).

Bodies that match a store model subclass it (a ``StepRunCreateBody`` *is* a ``StepRunCreate``),
narrowing only what the wire needs narrowed.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import Query
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from wharf.config.settings import schedule_problem
from wharf.config.spec import PipelineSpec
from wharf.core.enums import ComponentType, MetadataResourceType
from wharf.core.names import one_line
from wharf.server.auth.passwords import MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH
from wharf.store.account_models import ProjectRole
from wharf.store.column_rules import MAX_PID
from wharf.store.models import (
    ArtifactVersionCreate,
    RunStart,
    ScheduleCreate,
    StepRunCreate,
    StepRunUpdate,
)

MAX_INT = 2**31 - 1
MAX_BATCH = 1000
NameStr = Annotated[str, Field(min_length=1, max_length=255)]
LookupName = Annotated[str, Query(max_length=10_000, description="The exact name.")]
"""A name to look up (``?name=...``): any string; an unknown one is simply not found."""


def _utc(value: datetime) -> datetime:
    """Aware UTC (naive values are UTC already); refuse instants outside datetime's range."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the instant is out of range once converted to UTC") from None


WireDatetime = Annotated[datetime, AfterValidator(_utc)]

MAX_DESCRIPTION_LENGTH = 1000


DescriptionStr = Annotated[str, Field(max_length=MAX_DESCRIPTION_LENGTH), AfterValidator(one_line)]


class Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# ----------------------------------------------------------------------------- accounts


class LoginBody(Body):
    username: NameStr
    password: str = Field(min_length=1, max_length=MAX_PASSWORD_LENGTH)


class ExternalLoginBody(Body):
    token: str = Field(min_length=1, max_length=8192)


class UserCreateBody(Body):
    name: NameStr
    is_admin: bool = False
    password: str | None = Field(
        default=None, min_length=MIN_PASSWORD_LENGTH, max_length=MAX_PASSWORD_LENGTH
    )


class UserUpdateBody(Body):
    """Fields left None are unchanged; a user may change only their own password."""

    password: str | None = Field(
        default=None, min_length=MIN_PASSWORD_LENGTH, max_length=MAX_PASSWORD_LENGTH
    )
    active: bool | None = None
    is_admin: bool | None = None


class ProjectCreateBody(Body):
    name: NameStr


class MemberBody(Body):
    """Exactly one of ``user_id`` and ``service_account_id``."""

    user_id: UUID | None = None
    service_account_id: UUID | None = None
    role: ProjectRole


class ServiceAccountCreateBody(Body):
    name: NameStr
    description: DescriptionStr | None = None
    is_admin: bool = False


class ServiceAccountUpdateBody(Body):
    active: bool


class ApiKeyCreateBody(Body):
    name: NameStr


# ----------------------------------------------------------------------------- stacks, pipelines


class StackCreateBody(Body):
    name: NameStr
    components: dict[ComponentType, UUID] = Field(default_factory=dict)


class ComponentUpdateBody(Body):
    """The component's new configuration, replacing the whole of the old one."""

    configuration: dict[str, Any]


class PipelineBody(Body):
    project_id: UUID
    name: NameStr


class RunRecordBody(Body):
    """A pipeline call's records (``runs.record``): its pipeline by name, its snapshot of
    ``spec`` on ``stack_id``, its run."""

    project_id: UUID
    pipeline_name: NameStr
    stack_id: UUID | None = None
    spec: PipelineSpec
    run: RunStart


# ----------------------------------------------------------------------------- steps, artifacts


class StepRunCreateBody(StepRunCreate):
    id: UUID | None = None
    """The id the client chose for the step run (None: the server picks one). A create
    repeated with the id of a step run it wrote answers that step run: a client retries a
    create whose answer it lost without writing the step twice."""
    attempt: int = Field(default=1, ge=1, le=MAX_INT)
    cache_expires_at: WireDatetime | None = None
    resource_request_id: SkipJsonSchema[None] = None  # the server's resource wrapper sets it


PROCESS_FIELDS = ("pid", "pid_host", "pid_start")


class StepRunUpdateBody(StepRunUpdate):
    """A step run's change; its process (``pid`` and what names it) is not part of it: only
    the step's own process records that (:class:`StepProcessBody`)."""

    cache_expires_at: WireDatetime | None = None
    pid: SkipJsonSchema[None] = None
    pid_host: SkipJsonSchema[None] = None
    pid_start: SkipJsonSchema[None] = None

    @model_validator(mode="before")
    @classmethod
    def _no_process(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(data.get(f) is not None for f in PROCESS_FIELDS):
            raise ValueError(
                "pid, pid_host and pid_start are recorded only by the step's own process "
                "(PUT /api/v1/steps/{step_id}/process with its run token)"
            )
        return data


class StepProcessBody(Body):
    """The process an isolated step runs in, recorded by that process itself."""

    pid: int = Field(ge=1, le=MAX_PID)
    host: str = Field(min_length=1, max_length=255)
    start: str | None = Field(default=None, max_length=255)
    """The process's start token (``wharf.store.process_identity``)."""


class StepRunBatchBody(Body):
    steps: list[StepRunCreateBody] = Field(max_length=MAX_BATCH)


class FindCachedOrCreateBody(Body):
    step: StepRunCreateBody
    project_id: UUID
    now: WireDatetime
    record_hit: bool = False
    """On a hit, also record the cached step run for ``step`` (a hit is then one request)."""


class FinishBody(Body):
    update: StepRunUpdateBody = Field(default_factory=StepRunUpdateBody)
    outputs: dict[str, ArtifactVersionCreate] = Field(default_factory=dict, max_length=MAX_BATCH)


class LostRunsBody(Body):
    now: WireDatetime
    orphaned: list[UUID] = Field(default_factory=list, max_length=MAX_BATCH)
    spared: list[UUID] = Field(default_factory=list, max_length=MAX_BATCH)


class LostHeartbeatsBody(Body):
    now: WireDatetime
    run_id: UUID | None = None


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


class HeartbeatBody(Body):
    liveness_timeout_seconds: Annotated[float, Field(gt=0), AfterValidator(_finite)]
    """How long the step counts as alive without another heartbeat (the store refuses a
    timeout that ends beyond its calendar: 400)."""


class ArtifactVersionBatchBody(Body):
    versions: list[ArtifactVersionCreate] = Field(max_length=MAX_BATCH)


# ----------------------------------------------------------------------------- metadata, schedules


def _plain_json(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` if plain JSON holds every number of them: the database keeps NaN and the
    infinities (which Python's JSON reader accepts) as null."""
    pending: list[Any] = [values]
    while pending:
        value = pending.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"must be plain JSON: {value} is no JSON number")
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return values


class MetadataBody(Body):
    resource_type: MetadataResourceType
    resource_id: UUID
    values: Annotated[dict[str, Any], Field(max_length=MAX_BATCH), AfterValidator(_plain_json)]


class ScheduleCreateBody(ScheduleCreate):
    """A schedule as the SDK's ``Schedule`` allows it: exactly one trigger, a cron expression
    that fires, an end after the start."""

    interval_seconds: int | None = Field(default=None, ge=1, le=MAX_INT)
    run_once_start_time: WireDatetime | None = None
    start_time: WireDatetime | None = None
    end_time: WireDatetime | None = None

    @model_validator(mode="after")
    def _one_trigger(self) -> ScheduleCreateBody:
        problem = schedule_problem(
            self.cron_expression,
            self.interval_seconds,
            self.run_once_start_time,
            self.start_time,
            self.end_time,
        )
        if problem is not None:
            raise ValueError(problem)
        return self


class ScheduleActiveBody(Body):
    active: bool
