"""The request status machine and the client-driven operations on it, as pure functions.

Owns :data:`REQUEST_TRANSITIONS` (the status machine), :func:`check_request_transition`,
:func:`transition`, :func:`new_request`, :func:`release`, :func:`cancel`.

Invariants:
- terminal statuses (preempted, rejected, cancelled, released, expired) are final;
- "setting" a request to its current status is allowed (idempotent retries), and the client
  operations on a terminal request return it unchanged instead of failing;
- a request that ends (a terminal status) keeps no runtime state (``unknown``: nothing runs
  for it any more) and no lease past its end (``lease_expires_at`` at most the end time; an
  expired lease keeps the deadline it lapsed at), see :func:`lease_at_end`;
- every function takes ``now`` from the caller (the server's clock) and returns a new model;
  nothing here reads a clock or mutates its input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from wharf.core.enums import ReclaimTolerance, ResourceRequestRuntimeState
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import IllegalOperationError, IllegalTransitionError, InputError
from wharf.resource_manager.domain.requests import Demand, ResourceRequest
from wharf.resource_manager.domain.selectors import AttributeSelector, SubjectSelector
from wharf.resource_manager.domain.subjects import SubjectChain

_FINAL: frozenset[S] = frozenset()

REQUEST_TRANSITIONS: Mapping[S, frozenset[S]] = {
    S.PENDING: frozenset({S.ALLOCATED, S.REJECTED, S.CANCELLED, S.EXPIRED}),
    S.ALLOCATED: frozenset({S.PREEMPTING, S.RELEASED, S.EXPIRED}),
    S.PREEMPTING: frozenset({S.PREEMPTED, S.RELEASED, S.EXPIRED}),
    S.PREEMPTED: _FINAL,
    S.REJECTED: _FINAL,
    S.CANCELLED: _FINAL,
    S.RELEASED: _FINAL,
    S.EXPIRED: _FINAL,
}
"""The status machine::

    pending ──► allocated ──► preempting ──► preempted | released | expired
       │            └──► released | expired
       └──► rejected | cancelled | expired
"""

TERMINAL_STATUSES: frozenset[S] = frozenset(
    status for status, targets in REQUEST_TRANSITIONS.items() if not targets
)


def is_terminal(status: S) -> bool:
    return status in TERMINAL_STATUSES


def check_request_transition(current: S, new: S) -> None:
    """IllegalTransitionError unless a request may go from ``current`` to ``new``."""
    if current != new and new not in REQUEST_TRANSITIONS[current]:
        raise IllegalTransitionError(
            f"Illegal resource request status transition: {current.value} -> {new.value}."
        )


def require_aware(now: datetime) -> datetime:
    if now.tzinfo is None or now.utcoffset() is None:
        raise InputError("The server clock must give timezone-aware datetimes.")
    return now


ENDED_RUNTIME_STATE = ResourceRequestRuntimeState.UNKNOWN
"""The runtime state a request ends with: nothing runs for it any more."""


def lease_at_end(lease_expires_at: datetime | None, ended_at: datetime) -> datetime | None:
    """The lease of a request that ended at ``ended_at``: it ran no longer than the request (a
    released request's lease ends with it; an expired one keeps the deadline it lapsed at)."""
    if lease_expires_at is None:
        return None
    return min(lease_expires_at, ended_at)


def transition(
    request: ResourceRequest, new: S, now: datetime, reason: str | None, **changes: Any
) -> ResourceRequest:
    """``request`` moved to ``new`` (checked against the table); releases stamp released_at,
    and an ending clears the runtime state and ends the lease (see :func:`lease_at_end`)."""
    require_aware(now)
    check_request_transition(request.status, new)
    if request.status == new:
        return request
    update: dict[str, Any] = {"status": new, "status_reason": reason, **changes}
    if new is S.ALLOCATED:
        update.setdefault("allocated_at", now)
    if is_terminal(new):
        if request.holds_capacity:
            update.setdefault("released_at", now)
        update.setdefault("runtime_state", ENDED_RUNTIME_STATE)
        update.setdefault("lease_expires_at", lease_at_end(request.lease_expires_at, now))
    return request.model_copy(update=update)


def _positive_seconds(label: str, seconds: int | None) -> timedelta | None:
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds <= 0:
        raise InputError(f"{label} must be a positive whole number of seconds, got {seconds!r}.")
    return timedelta(seconds=seconds)


def new_request(
    *,
    request_id: UUID,
    subjects: Sequence[SubjectChain],
    demands: Sequence[Demand],
    now: datetime,
    lease_seconds: int | None = None,
    allocation_wait_timeout_seconds: int | None = None,
    reclaim_tolerance: ReclaimTolerance = ReclaimTolerance.NONE,
    pool: str | None = None,
    pool_selector: AttributeSelector | None = None,
    preemption_group: SubjectSelector | None = None,
    metadata: Mapping[str, str] | None = None,
) -> ResourceRequest:
    """A pending request; deadlines are computed from durations on the server's clock."""
    require_aware(now)
    lease = _positive_seconds("The lease duration", lease_seconds)
    wait = _positive_seconds("The allocation wait timeout", allocation_wait_timeout_seconds)
    return ResourceRequest(
        id=request_id,
        subjects=tuple(subjects),
        demands=tuple(demands),
        pool=pool,
        pool_selector=pool_selector,
        reclaim_tolerance=reclaim_tolerance,
        preemption_group=preemption_group,
        metadata=dict(metadata or {}),
        created_at=now,
        lease_expires_at=now + lease if lease else None,
        allocation_deadline=now + wait if wait else None,
    )


def release(request: ResourceRequest, now: datetime, by: str | None = None) -> ResourceRequest:
    """The holder is done: allocated → released, preempting → preempted, pending → cancelled.
    ``by``: who released it when not its holder (``user 'alice' (project admin)``), for the
    status reason its holder's step reports.

    Releasing a terminal request returns it unchanged (retries are safe).
    """
    if is_terminal(request.status):
        return request
    if request.status is S.PENDING:
        pending = "Released while pending." if by is None else f"Released by {by} while pending."
        return transition(request, S.CANCELLED, now, pending)
    if request.status is S.PREEMPTING:
        return transition(request, S.PREEMPTED, now, request.status_reason)
    return transition(request, S.RELEASED, now, f"Released by {by or 'the holder'}.")


def cancel(request: ResourceRequest, now: datetime, by: str | None = None) -> ResourceRequest:
    """Withdraw a pending request (``by``: who, as for :func:`release`). Terminal: unchanged.
    Holding capacity: use release()."""
    if is_terminal(request.status):
        return request
    if request.status is not S.PENDING:
        raise IllegalOperationError(
            f"Only a pending request can be cancelled; this one is {request.status.value}. "
            "Release it instead."
        )
    return transition(request, S.CANCELLED, now, f"Cancelled by {by or 'the client'}.")
