"""Waiting for a step's resource allocation before it launches.

The launcher polls the Resource Manager by *renewing* the pending request's lease (never a
plain get), so a waiter that dies stops renewing and its request lapses instead of holding a
place in the queue forever. Polls back off exponentially with jitter (1 s, doubling, at most
20 s), each reporting runtime state ``pending``. It fails fast, naming the request and the
reason, when the request ends without an allocation (rejected, cancelled, expired, released)
or is being reclaimed already (preempting, preempted), and when
``allocation_wait_timeout_seconds`` passes. Time and randomness are injected.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID

from wharf.config.settings import ResourceSettings
from wharf.config.spec import StepSpec
from wharf.core.enums import ResourceRequestRuntimeState, ResourceRequestStatus
from wharf.core.errors import EntityNotFoundError, WharfError

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


def wants_resources(spec: StepSpec | None) -> bool:
    """True when a step asks for at least one resource (and so waits for an allocation)."""
    resources = spec.config.resources if spec is not None else None
    return resources is not None and bool(resources.canonical_demands())


class AllocationFailedError(WharfError):
    """The step's resources will not be allocated; the message says why."""


class RequestLike(Protocol):
    @property
    def id(self) -> UUID: ...
    @property
    def status(self) -> ResourceRequestStatus: ...
    @property
    def status_reason(self) -> str | None: ...


class RenewRequests(Protocol):
    def renew(
        self,
        request_id: UUID,
        lease_seconds: int,
        runtime_state: ResourceRequestRuntimeState | None = None,
    ) -> RequestLike: ...

    def get(self, request_id: UUID) -> RequestLike: ...


@dataclass
class AllocationWaiter:
    requests: RenewRequests
    clock: Callable[[], datetime]
    sleep: Callable[[float], object]
    """Waits; a True result means "woken early by a release": the waiter then only reads the
    request (cheap, no write) and keeps its poll schedule, which renews the lease."""
    jitter: Callable[[], float] = random.random
    """A number in [0, 1): the fraction of each delay that is randomised."""

    def delays(self) -> Callable[[], float]:
        delay = INITIAL_POLL_SECONDS

        def next_delay() -> float:
            nonlocal delay
            current = delay
            delay = min(MAX_POLL_SECONDS, delay * 2)
            # full delay at most; spread waiters so they do not poll in lock-step
            return current * (0.5 + 0.5 * self.jitter())

        return next_delay

    def wait(self, request_id: UUID, settings: ResourceSettings) -> RequestLike:
        """Block until the request is allocated; return it (raises AllocationFailedError)."""
        timeout = settings.allocation_wait_timeout_seconds
        started = self.clock()
        next_delay = self.delays()
        delay = 0.0
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
            if request.status is ResourceRequestStatus.ALLOCATED:
                return request
            if request.status in FAIL_FAST:
                reason = f": {request.status_reason}" if request.status_reason else "."
                raise AllocationFailedError(
                    f"Resource request {request_id} {FAIL_FAST[request.status]}{reason}"
                )
            waited = (self.clock() - started).total_seconds()
            if waited >= timeout:
                why = f" (last reason: {request.status_reason})" if request.status_reason else ""
                raise AllocationFailedError(
                    f"Timed out after {timeout} seconds waiting for resource request "
                    f"{request_id} to be allocated{why}. Increase "
                    "`ResourceSettings.allocation_wait_timeout_seconds` or free capacity in "
                    "the pool."
                )
            delay = min(next_delay(), max(0.0, timeout - waited))
            self._sleep_until_poll(request_id, delay)

    def _sleep_until_poll(self, request_id: UUID, delay: float) -> None:
        """Sleep ``delay`` seconds; return early if a release made the request allocated."""
        deadline = self.clock().timestamp() + delay
        remaining = delay
        while remaining > 0 and self.sleep(remaining) is True:
            if self.requests.get(request_id).status is ResourceRequestStatus.ALLOCATED:
                return
            remaining = deadline - self.clock().timestamp()
