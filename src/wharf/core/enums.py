"""Every public status and mode name of Wharf, as string enums.

The string values are part of the public interface (REST payloads, CLI output, database rows)
and never change.
"""

from __future__ import annotations

from enum import StrEnum


class ExecutionStatus(StrEnum):
    """Status of a pipeline run or a step run."""

    INITIALIZING = "initializing"
    PROVISIONING = "provisioning"
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CACHED = "cached"
    SKIPPED = "skipped"
    RETRYING = "retrying"
    STOPPING = "stopping"
    STOPPED = "stopped"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"

    @property
    def is_finished(self) -> bool:
        return self in FINISHED_STATUSES

    @property
    def is_successful(self) -> bool:
        return self in (ExecutionStatus.COMPLETED, ExecutionStatus.CACHED, ExecutionStatus.SKIPPED)

    @property
    def is_placeholder(self) -> bool:
        """A run is a placeholder iff it has not started provisioning its steps yet."""
        return self in (ExecutionStatus.INITIALIZING, ExecutionStatus.PROVISIONING)


FINISHED_STATUSES = frozenset(
    {
        ExecutionStatus.COMPLETED,
        ExecutionStatus.FAILED,
        ExecutionStatus.CACHED,
        ExecutionStatus.SKIPPED,
        ExecutionStatus.STOPPED,
        ExecutionStatus.CANCELLED,
    }
)

PLACEHOLDER_STATUSES = frozenset({ExecutionStatus.INITIALIZING, ExecutionStatus.PROVISIONING})


class ExecutionMode(StrEnum):
    """What a run does when one of its steps fails."""

    FAIL_FAST = "fail_fast"
    """Stop the run at once: no new steps start and running steps are asked to stop."""
    STOP_ON_FAILURE = "stop_on_failure"
    """No new steps start; steps already running finish."""
    CONTINUE_ON_FAILURE = "continue_on_failure"
    """Steps that do not depend on the failed step keep running."""


class StepRuntime(StrEnum):
    INLINE = "inline"
    ISOLATED = "isolated"


class ResourceRequestStatus(StrEnum):
    PENDING = "pending"
    ALLOCATED = "allocated"
    PREEMPTING = "preempting"
    PREEMPTED = "preempted"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    RELEASED = "released"
    EXPIRED = "expired"


class ReclaimTolerance(StrEnum):
    NONE = "none"
    COORDINATED = "coordinated"
    ANY = "any"


class ResourceRequestRuntimeState(StrEnum):
    UNKNOWN = "unknown"
    PENDING = "pending"
    SUBMITTED = "submitted"
    RUNNING = "running"


class ComponentType(StrEnum):
    ORCHESTRATOR = "orchestrator"
    ARTIFACT_STORE = "artifact_store"
    STEP_OPERATOR = "step_operator"


class MetadataResourceType(StrEnum):
    PIPELINE_RUN = "pipeline_run"
    STEP_RUN = "step_run"
    ARTIFACT_VERSION = "artifact_version"
