"""Waiting for a step's resource allocation before it launches.

Owns :class:`AllocationWaiter` (polls by renewing the pending request's lease, between polls
sits in a wait room), :class:`WaitStop` (cuts a wait short) and :class:`AllocationFailedError`.
Invariants: a waiter polls only by renewing (never a plain get), so a dead waiter's request
lapses; an unreachable Resource Manager is not an answer (the waiter gives up only at the
timeout); the waiter enters the room before its first renewal reads the status and leaves it
only when it returns or raises, so no wake-up between a poll and the next wait is lost.
"""

from __future__ import annotations

import logging
import math
import random
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID

from wharf.config.settings import ResourceSettings
from wharf.core.enums import ResourceRequestRuntimeState, ResourceRequestStatus
from wharf.core.errors import EntityNotFoundError, WharfError
from wharf.execution.interrupt import StepInterrupted
from wharf.execution.outages import transient
from wharf.execution.resources.wait_room import RequestState

logger = logging.getLogger(__name__)

INITIAL_POLL_SECONDS = 1.0
MAX_POLL_SECONDS = 20.0
PENDING_LEASE_MARGIN_SECONDS = 40
"""A pending lease outlives the next poll by this much (a slow poll must not lapse it)."""

FAIL_FAST = {
    ResourceRequestStatus.REJECTED: "was rejected",
    ResourceRequestStatus.CANCELLED: "was cancelled",
    ResourceRequestStatus.EXPIRED: "expired",
    ResourceRequestStatus.RELEASED: "was released",
    ResourceRequestStatus.PREEMPTING: "is being reclaimed",
    ResourceRequestStatus.PREEMPTED: "was reclaimed",
}


class AllocationFailedError(WharfError):
    """The step's resources will not be allocated; the message says why."""


class RenewRequests(Protocol):
    def renew(
        self,
        request_id: UUID,
        lease_seconds: int,
        runtime_state: ResourceRequestRuntimeState | None = None,
    ) -> RequestState: ...


class WaitTicket(Protocol):
    def wait(self, timeout: float) -> RequestState | None:
        """Block up to ``timeout`` seconds; the request once it left the queue, else None."""
        ...

    def lease_left(self) -> float | None:
        """Seconds left of the request's first lease if this process just created it pending
        (None: unknown)."""
        ...

    def interrupt(self) -> None:
        """End the current and every later :meth:`wait` at once (the wait was stopped)."""
        ...


class WaitRoomLike(Protocol):
    def enter(self, request_id: UUID) -> AbstractContextManager[WaitTicket]: ...


class WaitStop:
    """Cuts one wait short from any thread: :meth:`interrupt` (the interface of a run's
    interruptible regions) wakes the waiter, which raises ``StepInterrupted(reason)``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake: Callable[[], object] | None = None
        self.reason: str | None = None

    def interrupt(self, reason: str) -> bool:
        """Stop the wait; True unless it was stopped already."""
        with self._lock:
            if self.reason is not None:
                return False
            self.reason = reason
            wake = self._wake
        if wake is not None:
            wake()
        return True

    def waking(self, wake: Callable[[], object]) -> None:
        """Call ``wake`` on a stop (at once if stopped already)."""
        with self._lock:
            self._wake = wake
            stopped = self.reason is not None
        if stopped:
            wake()

    def check(self) -> None:
        """Raise ``StepInterrupted`` once stopped."""
        if self.reason is not None:
            raise StepInterrupted(self.reason)


@dataclass
class AllocationWaiter:
    """Waits for one request's allocation (:meth:`wait`).

    Polls renew the pending request's lease and back off exponentially with jitter
    (:data:`INITIAL_POLL_SECONDS`, doubling, at most :data:`MAX_POLL_SECONDS`), each reporting
    runtime state ``pending``. A request this process has just created pending is first polled
    after the first delay (its first lease outlives it). The wait fails fast, naming the
    request and the reason, when the request ends without an allocation or is being reclaimed
    (:data:`FAIL_FAST`), and when ``allocation_wait_timeout_seconds`` passes. A poll that finds
    the Resource Manager (or the workspace server in between) unreachable keeps the same
    schedule, so a restart of either costs a step nothing.

    Between polls the waiter sits in the wait room (:class:`WaitRoomLike`:
    :class:`wharf.execution.resources.wait_room.WaitRoom`), which hands it its request as soon
    as it leaves the queue; a room that already knows it left (created allocated) wakes the
    waiter as it enters, with no poll at all. A poll that finds the request still queued is
    told once to ``on_pending``: a request allocated before its first poll is never reported
    as waiting. On a stop (``stop``) the waiter wakes at once and raises
    :class:`~wharf.execution.interrupt.StepInterrupted` before it looks at what woke it.
    """

    requests: RenewRequests
    clock: Callable[[], datetime]
    sleep: Callable[[float], object]
    """Sleeps between polls when there is no wait room."""
    jitter: Callable[[], float] = random.random
    """A number in [0, 1): the fraction of each delay that is randomised."""
    room: WaitRoomLike | None = None
    """Wakes this waiter between polls as soon as its request leaves the queue."""
    on_pending: Callable[[RequestState], object] | None = None
    """Called once, with the Resource Manager's answer, when a poll finds the request still
    queued (the answer's reason says what it waits for)."""
    stop: WaitStop | None = None
    """Cuts the wait short (the waiter raises ``StepInterrupted``)."""

    def delays(self) -> Callable[[], float]:
        delay = INITIAL_POLL_SECONDS

        def next_delay() -> float:
            nonlocal delay
            current = delay
            delay = min(MAX_POLL_SECONDS, delay * 2)
            # full delay at most; spread waiters so they do not poll in lock-step
            return current * (0.5 + 0.5 * self.jitter())

        return next_delay

    def wait(self, request_id: UUID, settings: ResourceSettings) -> RequestState:
        """Block until the request is allocated; return it (raises AllocationFailedError, or
        StepInterrupted once :attr:`stop` is interrupted)."""
        if self.room is None:
            return self._wait(request_id, settings, None)
        # Enter before the first renewal reads the status: a release from then on is seen.
        with self.room.enter(request_id) as ticket:
            if self.stop is not None:
                self.stop.waking(ticket.interrupt)
            return self._wait(request_id, settings, ticket)

    def _check_stop(self) -> None:
        if self.stop is not None:
            self.stop.check()

    def _wait(
        self, request_id: UUID, settings: ResourceSettings, ticket: WaitTicket | None
    ) -> RequestState:
        self._check_stop()
        if ticket is not None:
            known = ticket.wait(0)  # the room may know already (e.g. allocated at creation)
            self._check_stop()
            if known is not None and _left_queue(request_id, known):
                return known
        timeout = settings.allocation_wait_timeout_seconds
        tell = self.on_pending
        started = self.clock()
        next_delay = self.delays()
        delay = 0.0
        left = ticket.lease_left() if ticket is not None else None
        if ticket is not None and left is not None and left >= _first_poll_margin():
            # Just created with a lease that outlives the first wait by the margin a poll
            # would give: the first poll would only shorten it. Wait first, then poll.
            delay = min(next_delay(), float(timeout))
            woken = ticket.wait(delay)
            self._check_stop()
            if woken is not None and _left_queue(request_id, woken):
                return woken
        reason: str | None = None
        unreachable: WharfError | None = None
        while True:
            lease = math.ceil(min(delay * 2, MAX_POLL_SECONDS) + PENDING_LEASE_MARGIN_SECONDS)
            try:
                request = self.requests.renew(
                    request_id, lease, ResourceRequestRuntimeState.PENDING
                )
            except EntityNotFoundError:
                raise AllocationFailedError(
                    f"Resource request {request_id} was not found; it may have been deleted."
                ) from None
            except WharfError as exc:
                if not transient(exc):
                    raise
                # An outage (the RM or the server restarting): keep waiting on the same
                # schedule; the room still wakes this waiter, and the timeout still holds.
                if unreachable is None:
                    logger.warning(
                        "Could not poll resource request %s (still waiting): %s", request_id, exc
                    )
                unreachable = exc
            else:
                if unreachable is not None:
                    logger.info("Resource request %s can be polled again.", request_id)
                unreachable = None
                if _left_queue(request_id, request):
                    return request
                reason = request.status_reason
                if tell is not None:
                    tell(request)
                    tell = None  # once per wait
            waited = (self.clock() - started).total_seconds()
            if waited >= timeout:
                why = f" (last reason: {reason})" if reason else ""
                if unreachable is not None:
                    why = f" (the last poll could not reach it: {unreachable})"
                raise AllocationFailedError(
                    f"Timed out after {timeout} seconds waiting for resource request "
                    f"{request_id} to be allocated{why}. Increase "
                    "`ResourceSettings.allocation_wait_timeout_seconds` or free capacity in "
                    "the pool."
                )
            delay = min(next_delay(), max(0.0, timeout - waited))
            if ticket is None:
                self.sleep(delay)
                self._check_stop()
                continue
            woken = ticket.wait(delay)
            self._check_stop()
            # Woken means allocated or over: no need to ask the RM again.
            if woken is not None and _left_queue(request_id, woken):
                return woken


def _first_poll_margin() -> float:
    """Lease a new request must have left for its waiter to skip the immediate poll."""
    return INITIAL_POLL_SECONDS + PENDING_LEASE_MARGIN_SECONDS


def _left_queue(request_id: UUID, request: RequestState) -> bool:
    """False while pending; True once allocated; raises AllocationFailedError for any other
    status (so a wake-up always ends the wait: it is never handed a request still queued)."""
    if request.status is ResourceRequestStatus.PENDING:
        return False
    if request.status is ResourceRequestStatus.ALLOCATED:
        return True
    reason = f": {request.status_reason}" if request.status_reason else "."
    what = FAIL_FAST.get(request.status, f"is {request.status.value}")
    raise AllocationFailedError(f"Resource request {request_id} {what}{reason}")
