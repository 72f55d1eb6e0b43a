"""What one run's steps asked of the Resource Manager, settled when the run ends.

Owns :class:`RunRequests` and :func:`settle`. Invariant: once a run is settled, none of its
steps is queued and none of its requests is pending or allocated, unless the store or the
Resource Manager stayed unreachable for longer than the port's patience (then the leases lapse
on their own).
"""

from __future__ import annotations

import logging
import threading
from uuid import UUID

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import IllegalTransitionError, WharfError
from wharf.execution import step_writes
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.execution.outages import retry_through_outage
from wharf.execution.services import RunServices
from wharf.store.models import StepRunRecord, StepRunUpdate

logger = logging.getLogger(__name__)

NEVER_STARTED = "The run ended before the step got its resources."


class RunRequests:
    """The request of each step run the launcher created queued, and which of those steps
    are still queued as far as this process knows; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[UUID, UUID] = {}
        """Request id -> step run id, in creation order."""
        self._queued: set[UUID] = set()
        """Step runs created queued that no write of this process moved on yet."""

    def created(self, record: StepRunRecord) -> None:
        """``record`` was just written queued (with its request, where this process sees it)."""
        if record.status is not ExecutionStatus.QUEUED:
            return
        with self._lock:
            self._queued.add(record.id)
            if record.resource_request_id is not None:
                self._requests[record.resource_request_id] = record.id

    def moved_on(self, record: StepRunRecord) -> None:
        """``record`` is no longer queued (it was started, or ended)."""
        with self._lock:
            self._queued.discard(record.id)

    @property
    def request_ids(self) -> list[UUID]:
        with self._lock:
            return list(self._requests)

    @property
    def queued(self) -> list[UUID]:
        with self._lock:
            return sorted(self._queued)


def settle(services: RunServices, requests: RunRequests, run_status: ExecutionStatus) -> None:
    """The run ends ``run_status`` (as far as this process knows): end its steps still queued
    (stopped if the run was stopped, else failed) and release its requests still pending or
    held. Never raises a ``WharfError`` (logged). A step is normally ended and its request
    released by the write that ends it; settling covers what that missed: a wait cut short by
    an error, a release that failed while the Resource Manager was unreachable, a run that
    ended early."""
    status = (
        ExecutionStatus.STOPPED
        if run_status in (ExecutionStatus.STOPPED, ExecutionStatus.STOPPING)
        else ExecutionStatus.FAILED
    )
    patience = liveness_timeout_for(services.heartbeat_interval)
    for step_id in requests.queued:
        change = StepRunUpdate(status=status, status_reason=NEVER_STARTED)
        try:
            ended = retry_through_outage(
                lambda: step_writes.update(services, step_id, change),  # noqa: B023
                what=f"end the queued step run {step_id}",
                patience=patience,
                clock=services.clock,
                sleep=services.sleep,
            )
        except IllegalTransitionError:  # it moved on elsewhere (e.g. a forced stop)
            continue
        except WharfError as exc:
            logger.warning("Could not end the queued step run %s: %s", step_id, exc)
            continue
        requests.moved_on(ended)
    resources = services.resources
    ids = requests.request_ids
    if resources is not None and ids:
        resources.release_left(ids, clock=services.clock, sleep=services.sleep)
