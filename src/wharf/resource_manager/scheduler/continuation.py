"""Walking on from the last cycle for requests appended behind every queue, so a burst of
creations into a deep queue does not rerun the full cycle per creation.

Owns: :func:`continue_cycle`.

Invariant: the decisions equal those of :func:`~.cycle.schedule` over the snapshot with the
appended requests, restricted to them; the requests already waiting keep their reasons and
positions (they are ahead of every appended one, so nothing they saw changed).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from wharf.resource_manager.domain.lifecycle import require_aware
from wharf.resource_manager.domain.requests import ResourceRequest
from wharf.resource_manager.scheduler.cycle import CycleRun
from wharf.resource_manager.scheduler.decisions import CycleDecisions, Rejection
from wharf.resource_manager.scheduler.phase2_nominate import Candidate
from wharf.resource_manager.scheduler.phase3_order import QueueKey, policy_order


def continue_cycle(
    run: CycleRun, appended: Sequence[ResourceRequest], now: datetime
) -> CycleDecisions | None:
    """The decisions for ``appended`` as the continuation of ``run``'s walk, or None when this
    cannot tell (then the caller runs the full cycle). Walks ``run`` on (it stays the state of
    the walk for the next continuation).

    A new request of a pool that is not fair-sharing sorts behind every waiting request of its
    queue, and what it meets at the end of the walk (usage, claims, blocked shapes) is what the
    last walk left, so its outcome is that walk continued by one step. Conditions, all checked
    here except the first, which only the caller knows:

    - since ``run``'s decisions were applied, the live requests changed only by ``appended``
      (no release, cancellation, expiry, configuration change or other creation);
    - ``run`` was :attr:`~.cycle.CycleRun.continuable` (it changed no holder, so its walk's end
      state is that of a fresh cycle over the same requests), and so was every continuation
      since; an admission or preemption here changes the holders and ends that;
    - each appended request can be queued in exactly one pool, which is not fair-sharing (its
      order follows shares that change as the walk admits), and its queue key sorts after the
      key of the last request of that pool's walk. The key's "fits its unused reserved share"
      part is read from the walk's ledger, which is exact: a policy's usage changes only by
      admissions and preemptions, and a continuable walk made none.
    """
    require_aware(now)
    if not run.continuable:
        return None
    requests = sorted(appended, key=lambda r: (r.created_at, r.id.int))
    placed: list[tuple[Candidate, int, QueueKey]] = []
    rejections: list[Rejection] = []
    tails = dict(run.admitter.tails)
    for request in requests:
        nominated = run.nominator.nominate(request)
        if isinstance(nominated, str):
            rejections.append(Rejection(request.id, nominated))
            continue
        if len(nominated.plans) != 1:
            return None  # its walk in each pool would see the others mid-cycle
        ((pool_index, plans),) = nominated.plans.items()
        if run.catalog.pools[pool_index].pool.fair_sharing:
            return None
        key = (*policy_order(plans, run.ledger), nominated.fifo)
        if pool_index in tails:
            tail = tails[pool_index]
            if tail is None or key <= tail:
                return None
        tails[pool_index] = key
        placed.append((nominated, pool_index, key))
    # Checked every request before walking any: a refusal leaves the run untouched. The walk
    # visits pools in rank order, so decisions are listed as a full cycle lists them.
    rank = {view.index: position for position, view in enumerate(run.catalog.pools)}
    placed.sort(key=lambda item: (rank[item[1]], item[2]))
    admitter = run.admitter
    admitted_before = len(admitter.admissions)
    preempted_before = len(admitter.preemptions)
    for candidate, pool_index, key in placed:
        admitter.visit_tail(candidate, pool_index, key)
    candidates = [candidate for candidate, _, _ in placed]
    run.candidates.extend(candidates)
    admissions = tuple(admitter.admissions[admitted_before:])
    preemptions = tuple(admitter.preemptions[preempted_before:])
    decisions = CycleDecisions(
        now=now,
        admissions=admissions,
        preemptions=preemptions,
        rejections=tuple(sorted(rejections, key=lambda r: r.request_id.int)),
        waits=tuple(sorted(admitter.waits(candidates), key=lambda w: w.request_id.int)),
        stats={"pending": len(requests), "continued": 1},
    )
    # Holders changed: a fresh cycle would start from them, not walk into them.
    run.continuable = not (admissions or preemptions)
    return decisions
