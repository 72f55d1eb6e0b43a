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

from wharf.resource_manager.domain.leases import extend_after_restart, lapse
from wharf.resource_manager.domain.lifecycle import is_terminal
from wharf.resource_manager.domain.requests import ResourceRequest
from wharf.resource_manager.scheduler.decisions import Expiry, LeaseExtension
from wharf.resource_manager.scheduler.snapshot import SchedulerOptions


def expire(
    requests: Iterable[ResourceRequest], now: datetime, options: SchedulerOptions
) -> tuple[list[Expiry], list[LeaseExtension], list[ResourceRequest]]:
    """Return (expiries, lease extensions, the live requests the cycle continues with)."""
    expiries: list[Expiry] = []
    extensions: list[LeaseExtension] = []
    live: list[ResourceRequest] = []
    interval = options.restart_sweep_interval
    for request in requests:
        if is_terminal(request.status):
            continue
        if interval is not None:
            extended = extend_after_restart(request, now, interval)
            if extended is not None:
                extensions.append(LeaseExtension(request.id, extended))
            live.append(request)
            continue
        if request.lease_expires_at is None and request.allocation_deadline is None:
            # Nothing to lapse: the service schedules lease-free working copies (it expires
            # leases itself, before the cycle), so this is every request of its cycles.
            live.append(request)
            continue
        outcome = lapse(request, now)
        if outcome is None:
            live.append(request)
            continue
        status, reason = outcome
        expiries.append(Expiry(request.id, request.status, status, reason))
    return expiries, extensions, live
