"""Applying a cycle's decisions to a snapshot, purely (the in-memory twin of the service).

Owns: :func:`apply_decisions`.

Invariant: the input snapshot is not modified; the result shares unchanged models with it.
"""

from __future__ import annotations

from uuid import UUID

from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.domain.lifecycle import transition
from wharf.resource_manager.domain.requests import ResourceRequest
from wharf.resource_manager.scheduler.decisions import CycleDecisions
from wharf.resource_manager.scheduler.snapshot import Snapshot


def apply_decisions(snapshot: Snapshot, decisions: CycleDecisions) -> Snapshot:
    """``snapshot`` with ``decisions`` applied, as the SQL service applies them in one
    transaction: what tests, benchmarks and simulations use to run many cycles without a
    database. Every status change goes through the domain's transition table, so an
    inconsistent decision raises instead of being silently applied."""
    now = decisions.now
    requests: dict[UUID, ResourceRequest] = {r.id: r for r in snapshot.requests}
    for expiry in decisions.expiries:
        request = requests[expiry.request_id]
        requests[request.id] = transition(request, expiry.new_status, now, expiry.reason)
    for rejection in decisions.rejections:
        request = requests[rejection.request_id]
        requests[request.id] = transition(request, S.REJECTED, now, rejection.reason)
    for preemption in decisions.preemptions:
        request = requests[preemption.victim_id]
        requests[request.id] = transition(
            request,
            S.PREEMPTING,
            now,
            preemption.reason,
            preemption_initiated_by_id=preemption.preemptor_id,
        )
    for admission in decisions.admissions:
        request = requests[admission.request_id]
        requests[request.id] = transition(
            request, S.ALLOCATED, now, admission.reason, allocations=admission.allocations
        )
    for wait in decisions.waits:
        request = requests[wait.request_id]
        if request.status_reason != wait.reason:
            requests[request.id] = request.model_copy(update={"status_reason": wait.reason})
    return Snapshot(
        descriptors=snapshot.descriptors,
        pools=snapshot.pools,
        policies=snapshot.policies,
        requests=tuple(requests[r.id] for r in snapshot.requests),
    )
