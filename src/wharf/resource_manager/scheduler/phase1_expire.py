"""Phase 1: expire lapsed leases and allocation deadlines (or, after a restart, extend leases).

Owns: :func:`expire`.

Invariants:
- the rules are the domain's (:func:`wharf.resource_manager.domain.leases.lapse`): nothing
  expires before its deadline; a pending request whose lease lapses is cancelled; an allocated
  or preempting one is expired and its capacity is not counted by later phases of this cycle;
- in the first cycle after a restart every live lease is extended by one sweep interval and
  nothing expires, so no holder loses its allocation because the server was down.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.domain.leases import extend_after_restart, lapse
from wharf.resource_manager.domain.requests import HOLDING_STATUSES, ResourceRequest
from wharf.resource_manager.scheduler.decisions import Expiry, LeaseExtension
from wharf.resource_manager.scheduler.snapshot import LiveSplit, SchedulerOptions


def expire(
    requests: Iterable[ResourceRequest], now: datetime, options: SchedulerOptions
) -> tuple[list[Expiry], list[LeaseExtension], LiveSplit]:
    """Return (expiries, lease extensions, the live requests the cycle continues with, split
    by status in input order)."""
    expiries: list[Expiry] = []
    extensions: list[LeaseExtension] = []
    pending: list[ResourceRequest] = []
    holding: list[ResourceRequest] = []
    interval = options.restart_sweep_interval
    for request in requests:
        status = request.status
        if status is S.PENDING:
            bucket = pending
        elif status in HOLDING_STATUSES:
            bucket = holding
        else:
            continue  # terminal
        if interval is not None:
            extended = extend_after_restart(request, now, interval)
            if extended is not None:
                extensions.append(LeaseExtension(request.id, extended))
            bucket.append(request)
            continue
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
    return expiries, extensions, LiveSplit(tuple(pending), tuple(holding))
