"""Running one attempt of a step: inline, and the parts an isolated step's process shares.

Owns :class:`InlineExecutor`, the executors' interface (:class:`AttemptExecutor`,
:class:`AttemptResult`, :class:`PlacesAttempts`), a step's heartbeat (:func:`heartbeat_for`)
and the run of its user code (:func:`run_user_code`), both also used in a step's own process
(``wharf.execution.entrypoint``); the isolated executor is
:mod:`wharf.execution.isolated_attempts`. Invariants: an attempt starts from a step run in
status running; its end is recorded by :func:`~wharf.execution.attempt_ends.finish_attempt`,
in the orchestrating process (inline) and in a step's own process (isolated), or by the
isolated executor when its process ended without recording it; user errors never propagate.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from wharf.config.spec import StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import CredentialsRefusedError, WharfError
from wharf.execution import step_writes
from wharf.execution.artifact_outages import step_logs_through_outage
from wharf.execution.attempt_ends import describe_exception, finish_attempt
from wharf.execution.heartbeat import HeartbeatScheduler, HeartbeatWorker
from wharf.execution.interrupt import InterruptibleRegion, StepInterrupted
from wharf.execution.log_capture import StepLog, capturing, step_log, write_to_step_log
from wharf.execution.services import RunServices
from wharf.execution.step_runner import StepRunner
from wharf.store.answers import HeartbeatResponse
from wharf.store.models import ArtifactVersionCreate, ArtifactVersionRecord, StepRunRecord

if TYPE_CHECKING:  # the RM's models are only needed for type checking here
    from wharf.resource_manager.contract.models import ResourceRequestInfo

logger = logging.getLogger(__name__)


def heartbeat_for(
    services: RunServices,
    record: StepRunRecord,
    region: InterruptibleRegion,
    interval: float,
    *,
    stops_with_run: bool = True,
) -> HeartbeatWorker:
    """The heartbeat of ``record``'s attempt, interrupting ``region`` when the step (or, with
    ``stops_with_run``, its run) is asked to stop, or when the store refuses its credential."""

    def beat(liveness_timeout: float) -> HeartbeatResponse:
        return step_writes.heartbeat(services, record.id, liveness_timeout)

    def on_stop(response: HeartbeatResponse) -> None:
        if response.status is ExecutionStatus.FAILED:
            region.interrupt(
                f"Step was ended failed elsewhere while it ran (run {response.run_status.value}), "
                "e.g. judged lost: its result could no longer be recorded."
            )
            return
        what = "cancelled" if response.status is ExecutionStatus.CANCELLING else "stopped"
        region.interrupt(f"Step was {what} on request (run {response.run_status.value}).")

    def on_refused(error: CredentialsRefusedError) -> None:
        region.interrupt(
            f"The workspace server refused the step's credentials ({error.status}): "
            "its result could not be recorded."
        )

    name = f"step '{record.name}'"
    return HeartbeatWorker(
        name, beat, on_stop, interval, stops_with_run=stops_with_run, on_refused=on_refused
    )


@dataclass(frozen=True)
class AttemptResult:
    record: StepRunRecord
    """The step run as the attempt ended."""
    outputs: dict[str, ArtifactVersionRecord]
    """Its outputs (empty unless completed)."""


class AttemptExecutor(Protocol):
    def __call__(
        self,
        spec: StepSpec,
        record: StepRunRecord,
        inputs: Mapping[str, ArtifactVersionRecord],
        region: InterruptibleRegion,
        allocation: ResourceRequestInfo | None = None,
    ) -> AttemptResult:
        """Run one attempt whose record is running; return how it ended."""
        ...


@runtime_checkable
class PlacesAttempts(Protocol):
    """An executor that says where an attempt runs (an isolated one, as its backend says)."""

    def placement(self, spec: StepSpec, record: StepRunRecord) -> str | None:
        """Where the attempt of ``record`` runs, as a phrase that follows "started"; None:
        not said."""
        ...


@dataclass
class InlineExecutor:
    """Runs the attempt in this thread, with a heartbeat and captured output."""

    services: RunServices
    runner: StepRunner
    heartbeat_interval: float
    heartbeats: HeartbeatScheduler | None = None
    """Shared heartbeat thread; None: a thread per step."""

    def __call__(
        self,
        spec: StepSpec,
        record: StepRunRecord,
        inputs: Mapping[str, ArtifactVersionRecord],
        region: InterruptibleRegion,
        allocation: ResourceRequestInfo | None = None,
    ) -> AttemptResult:
        worker = None
        if spec.config.enable_heartbeat:
            worker = heartbeat_for(self.services, record, region, self.heartbeat_interval)
            if self.heartbeats is not None:
                self.heartbeats.add(worker)
            else:
                worker.start()
        log = StepLog(
            self.services.artifact_store,
            record.logs_uri,
            spec.name,
            step_logs_through_outage(self.services, region),
        )
        try:
            with step_log(record.id, log), capturing(log):
                outputs, error = run_user_code(
                    self.runner, spec, record, inputs, region, allocation
                )
            # Holding an allocation, the step's end and release go before the creation of steps
            # that will wait for one (its slot is idle until released); the stretch resumed
            # when the user code returned (StepRunner.run).
            resources = self.services.resources
            holders = (
                resources.holders if resources is not None and allocation is not None else None
            )
            with holders.holding() if holders is not None else nullcontext():
                final, versions = finish_attempt(
                    self.services, spec, record, outputs, error, region.reason
                )
            if worker is not None:
                worker.attempt_ended = True
            log.store()  # unless a forced stop stored it, having ended the step meanwhile
            return AttemptResult(final, versions)
        finally:
            if worker is not None:
                if self.heartbeats is not None:
                    self.heartbeats.remove(worker)
                else:
                    worker.stop()


def run_user_code(
    runner: StepRunner,
    spec: StepSpec,
    record: StepRunRecord,
    inputs: Mapping[str, ArtifactVersionRecord],
    region: InterruptibleRegion,
    allocation: ResourceRequestInfo | None = None,
) -> tuple[dict[str, ArtifactVersionCreate] | None, BaseException | None]:
    """The step's saved (not yet recorded) outputs, or the error that ended it (user errors
    never propagate)."""
    try:
        return runner.run(spec, record, inputs, region, allocation), None
    except StepInterrupted as exc:
        return None, exc
    except Exception as exc:
        later = runner.caller_shows(spec, record.attempt, exc)
        logger.error(
            "Step '%s' attempt %d failed: %s%s",
            spec.name,
            record.attempt,
            describe_exception(exc),
            " (its traceback follows with the RunFailedError)" if later else "",
            exc_info=not (later or isinstance(exc, WharfError)),
        )
        if later and not isinstance(exc, WharfError):  # the console shows it once, later;
            import traceback  # the stored log, read after the run, needs it too

            write_to_step_log("".join(traceback.format_exception(exc)))
        return None, exc
