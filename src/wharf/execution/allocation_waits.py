"""Waiting for the allocation of a queued step (one that asks for resources), and ending a
step whose wait ended without one; the wait before a retry.

Owns :class:`AllocationWaits`, one per launcher (per run), and :func:`wait_to_retry`.
Invariants: a step's wait is registered with the run's ``stops`` while it lasts, so a graceful
stop cuts it short (``StepInterrupted``); a step whose wait ended without an allocation ends
failed (stopped, if the run's stop interrupted it), its request released with that status.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from wharf.config.spec import StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import IllegalTransitionError, WharfError
from wharf.execution import step_writes
from wharf.execution.allocation import AllocationFailedError, WaitStop
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.execution.interrupt import Interruptible, StepInterrupted
from wharf.execution.outages import retry_through_outage
from wharf.execution.resources.holders_first import HoldersFirst
from wharf.execution.resources.run_requests import RunRequests
from wharf.execution.resources.wait_room import RequestState
from wharf.execution.services import RunServices
from wharf.execution.step_outcome import StepOutcome
from wharf.store.models import StepRunRecord, StepRunUpdate

if TYPE_CHECKING:  # the RM's models are only needed for type checking here
    from wharf.resource_manager.contract.models import ResourceRequestInfo

logger = logging.getLogger(__name__)


class Stops(Protocol):
    """Where a step's wait for resources is registered, so a graceful stop of the run
    interrupts it (the run's :class:`~wharf.execution.run_stop.RunStopper`)."""

    def add_region(self, region: Interruptible) -> None: ...
    def remove_region(self, region: Interruptible) -> None: ...


class AllocationWaits:
    """The allocation waits of one run's queued steps: an allocated step is marked started at
    the port and running in the store (through a store outage shorter than the liveness
    timeout), and told to the run's
    :class:`~wharf.execution.resources.run_requests.RunRequests` as moved on."""

    def __init__(
        self, services: RunServices, run_id: UUID, requests: RunRequests, stops: Stops | None
    ) -> None:
        self._services = services
        self._run_id = run_id
        self._requests = requests
        self._stops = stops

    def wait(
        self, spec: StepSpec, record: StepRunRecord, holders: HoldersFirst | None
    ) -> tuple[StepRunRecord, ResourceRequestInfo]:
        """Block until the step's request is allocated; then mark the step running (in a
        holder's stretch of ``holders`` from the allocation on)."""
        services = self._services
        resources = services.resources
        settings = spec.config.resources
        assert resources is not None and settings is not None
        request_id = record.resource_request_id
        if request_id is None:
            raise AllocationFailedError(f"Step '{spec.name}' got no resource request.")
        progress = services.progress
        run_id = self._run_id

        def on_pending(request: RequestState) -> None:
            progress.step_waiting(run_id, spec.name, settings, request.status_reason)

        # Woken as soon as a release of this process allocates the request, not at the next
        # poll; and as soon as the run is stopped (StepInterrupted).
        stop = WaitStop()
        if self._stops is not None:
            self._stops.add_region(stop)
        try:
            resources.wait(
                request_id,
                settings,
                clock=services.clock,
                sleep=services.sleep,
                on_pending=on_pending if progress.active else None,
                stop=stop,
            )
        finally:
            if self._stops is not None:
                self._stops.remove_region(stop)
        if holders is not None:
            # The slot is allocated and idle until the step's code runs: from here this thread
            # goes before the creation of steps that will wait (the caller ends the stretch).
            holders.begin()
        allocated = resources.mark_started(
            request_id, settings, clock=services.clock, sleep=services.sleep
        )
        running = self.mark_running(record)
        self._requests.moved_on(running)
        return running, allocated

    def mark_running(self, record: StepRunRecord) -> StepRunRecord:
        """``record`` moved to running, through a store outage shorter than the liveness
        timeout (a repeat of a write that was applied before its answer got lost finds the
        step running already)."""
        services = self._services
        running = StepRunUpdate(status=ExecutionStatus.RUNNING)
        try:
            return retry_through_outage(
                lambda: services.store.steps.update(record.id, running),
                what=f"mark step {record.name} running",
                patience=liveness_timeout_for(services.heartbeat_interval),
                clock=services.clock,
                sleep=services.sleep,
            )
        except IllegalTransitionError:
            current = services.store.steps.get(record.id)
            if current.status is ExecutionStatus.RUNNING:
                return current
            raise

    def not_allocated(
        self, spec: StepSpec, record: StepRunRecord, error: WharfError | StepInterrupted
    ) -> StepOutcome:
        """The step ends failed: its wait for an allocation ended with ``error`` (its request
        is released with that status; if this write fails too, the run's end settles it);
        or stopped, if the run's stop interrupted the wait."""
        resources = self._services.resources
        assert resources is not None
        status = ExecutionStatus.FAILED
        reason = str(error)
        if isinstance(error, StepInterrupted):
            status = ExecutionStatus.STOPPED
            reason = str(error) or "Stopped on request."
        elif not isinstance(error, AllocationFailedError):
            reason = f"Could not wait for resources: {error}"
        change = StepRunUpdate(status=status, status_reason=reason)
        try:
            final = step_writes.update(self._services, record.id, change)
        except IllegalTransitionError:  # ended elsewhere meanwhile (a forced stop): theirs stands
            final = self._services.store.steps.get(record.id)
            return StepOutcome(spec.name, final.status, step_run=final, reason=final.status_reason)
        except WharfError as exc:
            logger.warning("Could not record that step '%s' %s: %s", spec.name, status.value, exc)
            return StepOutcome(spec.name, status, step_run=record, reason=reason)
        self._requests.moved_on(final)
        resources.step_ended(elsewhere=False)
        return StepOutcome(spec.name, final.status, step_run=final, reason=reason)


def wait_to_retry(
    stops: Stops | None, wait: Callable[[threading.Event, float], object], delay: float
) -> None:
    """Wait ``delay`` s before a step's retry with ``wait`` (the run's ``RunServices.wait``),
    cut short by an event a graceful stop (``stops``) sets, so the wait ends at once and the
    store refuses the attempt."""
    woken = threading.Event()
    if stops is None:
        wait(woken, delay)
        return
    stop = WaitStop()
    stop.waking(woken.set)
    stops.add_region(stop)
    try:
        wait(woken, delay)
    finally:
        stops.remove_region(stop)
