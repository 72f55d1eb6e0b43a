"""Records returned by the store, and the create/update/filter models passed to it.

Records are immutable snapshots of rows. Times are timezone-aware UTC datetimes set by the
store's clock (callers never send ``created``/``updated``). Ids are UUIDs. The length limits
their fields check are ``wharf.store.column_rules``'s; what some engine calls answer besides a
record (heartbeats, cache decisions, sweeps) is ``wharf.store.answers``'s.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from wharf.config.liveness import LONGEST_LIVENESS_WINDOW_SECONDS
from wharf.config.spec import PipelineSpec, StepSpec
from wharf.core.enums import ComponentType, ExecutionStatus, MetadataResourceType, StepRuntime
from wharf.core.names import one_line

# The store's lists page with the one paging model, re-exported (callers name it from here).
from wharf.core.paging import MAX_PAGE_SIZE as MAX_PAGE_SIZE  # noqa: PLC0414
from wharf.core.paging import Page as Page  # noqa: PLC0414
from wharf.core.paging import PageRequest as PageRequest  # noqa: PLC0414
from wharf.store.column_rules import MAX_PID, Key, LongText, OrchestratorRunId

IdPrefix = Annotated[str, Field(pattern=r"^[0-9a-f]{1,32}$")]
"""The start of ids' hex form (``wharf.core.ids``): a filter keeps ids that start with it."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# ----------------------------------------------------------------------------- records


class UserRecord(_Frozen):
    id: UUID
    name: str
    is_admin: bool
    created: datetime


class ProjectRecord(_Frozen):
    id: UUID
    name: str
    created: datetime


class ComponentRecord(_Frozen):
    id: UUID
    name: str
    type: ComponentType
    flavor: str
    configuration: dict[str, Any]
    created: datetime


class StackRecord(_Frozen):
    id: UUID
    name: str
    components: dict[ComponentType, UUID]
    created: datetime


class PipelineRecord(_Frozen):
    id: UUID
    project_id: UUID
    name: str
    created: datetime


class SnapshotRecord(_Frozen):
    id: UUID
    project_id: UUID
    pipeline_id: UUID
    stack_id: UUID | None
    spec: PipelineSpec
    created: datetime


class PipelineRunRecord(_Frozen):
    id: UUID
    project_id: UUID
    pipeline_id: UUID
    snapshot_id: UUID
    user_id: UUID | None
    name: str
    status: ExecutionStatus
    status_reason: str | None
    orchestrator_run_id: str | None
    start_time: datetime | None
    end_time: datetime | None
    created: datetime
    updated: datetime
    orchestrator_host: str | None = None
    """The host of the process that runs the run (None: not recorded, e.g. a placeholder)."""
    orchestrator_pid: int | None = None
    orchestrator_start: str | None = None
    """The start token of that process (``wharf.store.process_identity``)."""
    last_heartbeat: datetime | None = None
    """When the orchestrating process last said it is alive."""
    heartbeat_deadline: datetime | None = None
    """When the run counts as lost without a new beat; None once the run has finished."""
    stop_forced: bool = False
    """A forced stop was asked: the orchestrating process kills its steps' processes."""

    @field_validator("stop_forced", mode="before")
    @classmethod
    def _null_is_false(cls, value: Any) -> Any:
        return False if value is None else value

    @property
    def is_placeholder(self) -> bool:
        return self.status.is_placeholder


class OrchestratorProcess(_Frozen):
    """The process that runs a run, and how long the store waits for its next beat."""

    host: Annotated[str, Field(min_length=1, max_length=255), AfterValidator(one_line)]
    """One line (refused before a start or a beat writes anything)."""
    pid: int = Field(ge=1, le=MAX_PID)
    start: Annotated[str, Field(max_length=255), AfterValidator(one_line)] | None = None
    """Its start token (``wharf.store.process_identity``); None where unknown."""
    liveness_timeout_seconds: float = Field(gt=0, le=LONGEST_LIVENESS_WINDOW_SECONDS)


class StepRunRecord(_Frozen):
    id: UUID
    project_id: UUID
    run_id: UUID
    name: str
    status: ExecutionStatus
    status_reason: str | None
    attempt: int
    """1 for the first try; each retry is a new step run with attempt + 1."""
    cache_key: str | None
    cache_expires_at: datetime | None
    original_step_run_id: UUID | None
    """For a cached step: the step run whose outputs it reuses."""
    code_hash: str | None
    source_code: str | None
    docstring: str | None
    parameters: dict[str, Any]
    inputs: dict[str, UUID]
    """Input name -> artifact version id."""
    outputs: dict[str, UUID]
    """Output name -> artifact version id."""
    start_time: datetime | None
    end_time: datetime | None
    last_heartbeat: datetime | None
    heartbeat_deadline: datetime | None = None
    """When the step counts as lost with no beat (last beat + its liveness timeout); None
    before the first beat and once its status is final."""
    spec: StepSpec | None = None
    """The step's compiled spec (dynamic steps; isolated steps read it in their process)."""
    logs_uri: str | None = None
    """Artifact-store URI of the step's captured stdout/stderr."""
    pid: int | None = None
    """Process id of an isolated step's process (for ``wharf runs stop --force``)."""
    pid_host: str | None = None
    """The host that process runs on."""
    pid_start: str | None = None
    """That process's start token (``wharf.store.process_identity``): a reused pid differs."""
    resource_request_id: UUID | None = None  # the step's Resource Manager request, if any
    runtime: StepRuntime | None = None
    """Where the step runs (inline or isolated), when known."""
    calls: dict[int, str] | None = None
    """Dynamic calls recorded with it, position -> invocation id (``execution.call_order``)."""
    created: datetime
    updated: datetime


class ArtifactRecord(_Frozen):
    id: UUID
    project_id: UUID
    name: str
    created: datetime


class ArtifactVersionRecord(_Frozen):
    id: UUID
    artifact_id: UUID
    project_id: UUID
    name: str
    """The artifact's name (denormalised for display)."""
    version: int
    """1, 2, ... per artifact, in creation order."""
    uri: str
    data_type: str
    materializer: str
    content_hash: str | None
    producer_step_run_id: UUID | None
    artifact_store_id: UUID | None
    created: datetime


class RunMetadataRecord(_Frozen):
    id: UUID
    resource_type: MetadataResourceType
    resource_id: UUID
    key: str
    value: Any
    created: datetime


class ScheduleRecord(_Frozen):
    id: UUID
    project_id: UUID
    pipeline_id: UUID
    snapshot_id: UUID
    name: str
    cron_expression: str | None
    interval_seconds: int | None
    run_once_start_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    catchup: bool
    active: bool
    created: datetime


# ----------------------------------------------------------------------------- creates


class ComponentCreate(_Frozen):
    name: str = Field(min_length=1, max_length=255)
    type: ComponentType
    flavor: str = Field(min_length=1, max_length=255)
    configuration: dict[str, Any] = Field(default_factory=dict)


class SnapshotCreate(_Frozen):
    id: UUID | None = None  # chosen before the first try: a repeat answers what was written
    project_id: UUID
    pipeline_id: UUID
    stack_id: UUID | None = None
    spec: PipelineSpec


class RunCreate(_Frozen):
    id: UUID | None = None  # chosen before the first try: a repeat answers the run written
    project_id: UUID
    pipeline_id: UUID
    snapshot_id: UUID
    name: str = Field(min_length=1, max_length=255)
    status: ExecutionStatus = ExecutionStatus.INITIALIZING
    status_reason: LongText | None = None
    orchestrator_run_id: OrchestratorRunId | None = None
    user_id: UUID | None = None
    orchestrator: OrchestratorProcess | None = None
    """The process that runs the run (recorded with a first heartbeat), if it is started."""

    @property
    def is_placeholder(self) -> bool:
        return self.status.is_placeholder


class RunStart(_Frozen):
    """A run recorded with its snapshot (``runs.record``); its ids as in ``RunCreate.id``."""

    id: UUID | None = None
    snapshot_id: UUID | None = None
    name: str = Field(min_length=1, max_length=255)
    status: ExecutionStatus = ExecutionStatus.INITIALIZING
    orchestrator_run_id: OrchestratorRunId | None = None
    user_id: UUID | None = None
    orchestrator: OrchestratorProcess | None = None

    def of(self, snapshot: SnapshotRecord) -> RunCreate:
        """This run as a run of ``snapshot``."""
        ids = {"project_id": snapshot.project_id, "pipeline_id": snapshot.pipeline_id}
        return RunCreate(**{**dict(self), **ids, "snapshot_id": snapshot.id})


class StepRunCreate(_Frozen):
    id: UUID | None = None
    """Chosen before the step run is written (None: the store picks one): a create repeated
    with it (its answer was lost in an outage) gets what was written, not a second one."""
    run_id: UUID
    name: str = Field(min_length=1, max_length=255)
    status: ExecutionStatus
    status_reason: LongText | None = None
    attempt: int = Field(default=1, ge=1)
    cache_key: Key | None = None
    cache_expires_at: datetime | None = None
    original_step_run_id: UUID | None = None
    code_hash: Key | None = None
    source_code: str | None = None
    docstring: str | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, UUID] = Field(default_factory=dict)
    outputs: dict[str, UUID] = Field(default_factory=dict)
    spec: StepSpec | None = None
    logs_uri: LongText | None = None
    runtime: StepRuntime | None = None
    calls: dict[int, str] | None = None  # as StepRunRecord.calls
    resource_request_id: UUID | None = None
    """Set only where the request is made (:mod:`wharf.execution.step_writes` in embedded mode,
    :mod:`wharf.server.step_resources` on the server, which drops any client's value)."""

    def reusing(self, cached: StepRunRecord) -> StepRunCreate:
        """The cached step run that records this step reusing ``cached`` (its outputs, logs and
        cache expiry); this step's own code and docstring win over the original's."""
        return self.model_copy(
            update={
                "status": ExecutionStatus.CACHED,
                "status_reason": None,
                "cache_expires_at": cached.cache_expires_at,
                "original_step_run_id": cached.id,
                "outputs": dict(cached.outputs),
                "source_code": self.source_code or cached.source_code,
                "docstring": self.docstring or cached.docstring,
                "logs_uri": cached.logs_uri,
                "runtime": None,  # it never runs
                "id": None,  # a record of its own; whoever writes it names it (step_writes)
                "resource_request_id": None,
            }
        )


class ArtifactVersionCreate(_Frozen):
    project_id: UUID
    name: str = Field(min_length=1, max_length=255)
    """Artifact name; the artifact is created on first use."""
    uri: LongText
    data_type: LongText
    materializer: LongText
    content_hash: Key | None = None
    producer_step_run_id: UUID | None = None
    artifact_store_id: UUID | None = None


class ScheduleCreate(_Frozen):
    project_id: UUID
    pipeline_id: UUID
    snapshot_id: UUID
    name: str = Field(min_length=1, max_length=255)
    cron_expression: Key | None = None
    interval_seconds: int | None = None
    run_once_start_time: datetime | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    catchup: bool = False

    @field_validator("cron_expression")
    @classmethod
    def _valid_cron(cls, value: str | None) -> str | None:
        """A cron expression that does not parse or never fires is refused (``config.cron``)."""
        if value is not None:
            from wharf.config.cron import cron_problem

            problem = cron_problem(value)
            if problem is not None:
                raise ValueError(problem)
        return value


# ----------------------------------------------------------------------------- updates


class RunUpdate(_Frozen):
    """Fields left None are unchanged."""

    status: ExecutionStatus | None = None
    status_reason: LongText | None = None
    orchestrator_run_id: OrchestratorRunId | None = None
    stop_forced: bool | None = None
    """True: the stop is forced (set once; only a stopping run takes it)."""


class StepRunUpdate(_Frozen):
    """Fields left None are unchanged; ``outputs`` are added to the existing links."""

    status: ExecutionStatus | None = None
    status_reason: LongText | None = None
    outputs: dict[str, UUID] | None = None
    cache_key: Key | None = None
    cache_expires_at: datetime | None = None
    logs_uri: LongText | None = None
    pid: int | None = Field(default=None, ge=1, le=MAX_PID)
    pid_host: str | None = Field(default=None, max_length=255)
    pid_start: str | None = Field(default=None, max_length=255)
    resource_request_id: UUID | None = None


# ----------------------------------------------------------------------------- filters


class RunFilter(_Frozen):
    project_id: UUID | None = None
    pipeline_id: UUID | None = None
    snapshot_id: UUID | None = None
    name: str | None = None
    status: ExecutionStatus | None = None
    orchestrator_run_id: str | None = None
    id_prefix: IdPrefix | None = None


class StepRunFilter(_Frozen):
    project_id: UUID | None = None
    run_id: UUID | None = None
    names: tuple[str, ...] | None = None
    """Any of these step names (the REST layer's ``name=oneof:[...]``)."""
    status: ExecutionStatus | None = None
    statuses: tuple[ExecutionStatus, ...] | None = None
    """Any of these statuses."""
    cache_key: str | None = None
    id_prefix: IdPrefix | None = None


class PipelineFilter(_Frozen):
    project_id: UUID | None = None
    name: str | None = None
    id_prefix: IdPrefix | None = None


class ScheduleFilter(_Frozen):
    project_id: UUID | None = None
    pipeline_id: UUID | None = None
    name: str | None = None
    id_prefix: IdPrefix | None = None


class ArtifactFilter(_Frozen):
    project_id: UUID | None = None
    name: str | None = None
    id_prefix: IdPrefix | None = None


class ArtifactVersionFilter(_Frozen):
    project_id: UUID | None = None
    artifact_id: UUID | None = None
    name: str | None = None
    producer_step_run_id: UUID | None = None
    id_prefix: IdPrefix | None = None
