"""What the store's engine calls answer besides plain records: a step's heartbeat (its status,
its run's, and whether it must stop), an orchestrating process's beat, a cache lookup that may
create the step run (``find_cached_or_create``), and the runs a lost-orchestrator sweep ended.

Like the records of ``wharf.store.models``, immutable.
"""

from __future__ import annotations

from uuid import UUID

from pydantic import Field

from wharf.core.enums import ExecutionStatus
from wharf.store.models import ArtifactVersionRecord, PipelineRunRecord, StepRunRecord, _Frozen


class HeartbeatResponse(_Frozen):
    """What a step's heartbeat learns: its own status and its run's."""

    step_run_id: UUID
    status: ExecutionStatus
    run_status: ExecutionStatus
    resource_request_id: UUID | None = None
    """The step's RM request, if any (read with the beat: its lease renewed without a read)."""

    @property
    def should_stop(self) -> bool:
        """True when the step must stop: it or its run was asked to stop or cancel."""
        return self.step_should_stop or self.run_status in (
            ExecutionStatus.STOPPING,
            ExecutionStatus.STOPPED,
        )

    @property
    def step_should_stop(self) -> bool:
        """True when the step itself was asked to stop or cancel (a forced stop, a reclaim), or
        was ended ``failed`` while it still beats (judged lost by a sweep, e.g. its run's
        orchestrator gone: no one else will stop it), whatever its run's status."""
        return self.status in STOP_SIGNALS or self.status is ExecutionStatus.FAILED


STOP_SIGNALS = frozenset(
    {
        ExecutionStatus.STOPPING,
        ExecutionStatus.STOPPED,
        ExecutionStatus.CANCELLING,
        ExecutionStatus.CANCELLED,
    }
)


class RunHeartbeatResponse(_Frozen):
    """What an orchestrating process's beat learns about its run."""

    run_id: UUID
    status: ExecutionStatus
    stop_forced: bool


class LostRun(_Frozen):
    """A run the lost-orchestrator sweep ended, with the steps it ended."""

    run: PipelineRunRecord
    steps: list[StepRunRecord]


class CachedOrCreated(_Frozen):
    """The answer of ``find_cached_or_create``: a cache hit, or the newly created step run."""

    step: StepRunRecord
    """The reusable step run found (``created`` False), else the step run created."""
    created: bool
    outputs: dict[str, ArtifactVersionRecord] = Field(default_factory=dict)
    """On a hit: the found step's output versions the store sent along (by output name), so
    a process that does not know them need not read them; may lack some (read those)."""
    recorded: StepRunRecord | None = None
    """On a hit, when asked for: the cached step run recorded for the caller's step."""
