"""Phase 1: expire lapsed leases and allocation deadlines.

Owns: :func:`expire`.

Invariants: the rules are the domain's (:func:`wharf.resource_manager.domain.leases.lapse`):
nothing expires before its deadline; a pending request whose lease lapses is cancelled; an
allocated or preempting one is expired and its capacity is not counted by later phases of this
cycle. Lease time lost while no Resource Manager served is given back by the service
(:mod:`wharf.resource_manager.service.leader`), not here.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.domain.leases import lapse
from wharf.resource_manager.domain.requests import HOLDING_STATUSES, ResourceRequest
from wharf.resource_manager.scheduler.decisions import Expiry
from wharf.resource_manager.scheduler.snapshot import LiveSplit


def expire(requests: Iterable[ResourceRequest], now: datetime) -> tuple[list[Expiry], LiveSplit]:
    """Return (expiries, the live requests the cycle continues with, split by status in input
    order)."""
    expiries: list[Expiry] = []
    pending: list[ResourceRequest] = []
    holding: list[ResourceRequest] = []
    for request in requests:
        status = request.status
        if status is S.PENDING:
            bucket = pending
        elif status in HOLDING_STATUSES:
            bucket = holding
        else:
            continue  # terminal
        if request.lease_expires_at is None and request.allocation_deadline is None:
            # Nothing to lapse: the service's lease-free working copies (it expires leases
            # itself, before the cycle; its own cycles hand over a split snapshot and skip
            # this loop, its what-if questions do not).
            bucket.append(request)
            continue
        outcome = lapse(request, now)
        if outcome is None:
            bucket.append(request)
            continue
        lapsed, reason = outcome
        expiries.append(Expiry(request.id, status, lapsed, reason))
    return expiries, LiveSplit(tuple(pending), tuple(holding))
