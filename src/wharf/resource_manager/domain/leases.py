"""Lease rules: when a request lapses and how renewal works.

Owns :func:`lease_lapsed`, :func:`lapse`, :func:`renew` and the reason texts they produce.

Invariants:
- only the server's clock counts: ``now`` is passed in, clients send durations;
- a lease lapses when ``now >= lease_expires_at``, never before (as etcd's "at least TTL");
- a pending request whose lease lapses is *cancelled* (nobody waits for it any more); an
  allocated or preempting one is *expired* and its capacity freed; a pending request past its
  allocation deadline is *expired*;
- renewing a terminal request returns it unchanged; renewal records the runtime state.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from wharf.core.enums import ResourceRequestRuntimeState
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import InputError
from wharf.resource_manager.domain.lifecycle import is_terminal, require_aware, transition
from wharf.resource_manager.domain.requests import ResourceRequest

LEASE_EXPIRED_WHILE_PENDING = "Lease expired while pending."
LEASE_EXPIRED = "Lease expired; the allocation was freed."
ALLOCATION_WAIT_TIMED_OUT = "Allocation wait timeout elapsed before any pool admitted the request."


def lease_lapsed(request: ResourceRequest, now: datetime) -> bool:
    """Whether the request's lease deadline has been reached (never before it)."""
    deadline = request.lease_expires_at
    return deadline is not None and now >= deadline


def lapse(request: ResourceRequest, now: datetime) -> tuple[S, str] | None:
    """The status and reason a request takes because time ran out, or None if it has not.

    A lapsed lease wins over an elapsed allocation deadline: the holder is gone either way.
    """
    require_aware(now)
    if is_terminal(request.status):
        return None
    if request.status is S.PENDING:
        if lease_lapsed(request, now):
            return S.CANCELLED, LEASE_EXPIRED_WHILE_PENDING
        deadline = request.allocation_deadline
        if deadline is not None and now >= deadline:
            return S.EXPIRED, ALLOCATION_WAIT_TIMED_OUT
        return None
    if lease_lapsed(request, now):
        return S.EXPIRED, LEASE_EXPIRED
    return None


def apply_lapse(request: ResourceRequest, now: datetime) -> ResourceRequest:
    """``request`` after :func:`lapse` (unchanged if nothing lapsed)."""
    outcome = lapse(request, now)
    if outcome is None:
        return request
    status, reason = outcome
    return transition(request, status, now, reason)


def renew(
    request: ResourceRequest,
    now: datetime,
    lease_seconds: int,
    runtime_state: ResourceRequestRuntimeState | None = None,
) -> ResourceRequest:
    """Extend the lease to ``now + lease_seconds`` and record the runtime state.

    The new deadline replaces the old one even when it is earlier: the holder chooses its lease
    (a long initialisation lease is followed by short heartbeat leases). Terminal requests are
    returned unchanged, so a late heartbeat never resurrects anything.
    """
    require_aware(now)
    if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, int) or lease_seconds <= 0:
        raise InputError(
            f"The lease duration must be a positive whole number of seconds, got {lease_seconds!r}."
        )
    if is_terminal(request.status):
        return request
    update: dict[str, object] = {
        "lease_expires_at": now + timedelta(seconds=lease_seconds),
        "renewed_at": now,
    }
    if runtime_state is not None:
        update["runtime_state"] = runtime_state
    return request.model_copy(update=update)
