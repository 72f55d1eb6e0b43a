"""The scheduling cycle: ``schedule(snapshot, now) -> CycleDecisions``.

Owns: :func:`schedule` and :func:`run_cycle` (which also returns the cycle's internals, for
:mod:`.explain` and tests).

As in Kueue's scheduler, a cycle is a fixed sequence of small phases over one snapshot:
0. index (:mod:`.catalog`, :mod:`.holders`, :mod:`.ledger`), 1. expire, 2. nominate, 3. order,
4. fit, 5. preempt, 6. admit, claim or wait (the ``phaseN_*`` modules).

Invariants: pure and deterministic — no clock reads (``now`` is an argument), no I/O, no
randomness, no dependence on input order (everything is sorted by total keys), and the
snapshot is never mutated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from wharf.resource_manager.domain.lifecycle import require_aware
from wharf.resource_manager.domain.requests import ResourceRequest
from wharf.resource_manager.scheduler.catalog import Catalog
from wharf.resource_manager.scheduler.decisions import (
    CycleDecisions,
    Expiry,
    Rejection,
)
from wharf.resource_manager.scheduler.holders import HolderIndex, build_holders
from wharf.resource_manager.scheduler.ledger import Ledger
from wharf.resource_manager.scheduler.phase1_expire import expire
from wharf.resource_manager.scheduler.phase2_nominate import Candidate, Nominator
from wharf.resource_manager.scheduler.phase4_fit import Fitter
from wharf.resource_manager.scheduler.phase6_admit import Admitter
from wharf.resource_manager.scheduler.prepared import Prepared
from wharf.resource_manager.scheduler.snapshot import SchedulerOptions, Snapshot


@dataclass(slots=True)
class CycleRun:
    """Everything one cycle computed; :attr:`decisions` is what the service applies."""

    decisions: CycleDecisions
    catalog: Catalog
    holders: HolderIndex
    ledger: Ledger
    """The ledger at the end of the cycle (admissions added, claims made)."""
    candidates: list[Candidate]
    admitter: Admitter
    nominator: Nominator
    continuable: bool
    """The walk's end state is that of a fresh cycle over the snapshot with the decisions
    applied: the cycle changed no holder (no admission, preemption, expiry or lease
    extension), so requests appended behind every queue may be walked on from it
    (:mod:`.continuation`, which clears it when it admits or preempts)."""


def run_cycle(
    snapshot: Snapshot,
    now: datetime,
    options: SchedulerOptions | None = None,
    *,
    trace: UUID | None = None,
    prepared: Prepared | None = None,
) -> CycleRun:
    """One cycle, keeping its internals; ``trace`` records one request's notes in every pool.

    ``prepared``: the configuration's index from earlier cycles; ignored unless it was built
    from this snapshot's very configuration tuples (:meth:`Prepared.serves`). When it is used,
    its catalog is reused and the holders and ledger are brought up to date from the previous
    cycle's (only requests that changed are indexed again).

    Phases: 0. index the configuration, the holders and the usage ledger; 1. expire lapsed
    leases and allocation deadlines (or extend leases after a restart) and split the live
    requests into pending and holding; 2. nominate: resolve demands, match policies, reject what
    can never be admitted; 3. order each pool's queue; 4. fit each candidate in each pool
    (all-or-nothing, one policy path); 5. preempt for blocked heads, on a copy of the ledger;
    6. admit, claim or wait, and give every non-admitted request a reason.
    """
    options = options or SchedulerOptions()
    require_aware(now)
    split = snapshot.split
    if split is not None:
        # Lease-free: nothing can lapse.
        expiries: list[Expiry] = []
        live = split
    else:
        expiries, live = expire(snapshot.requests, now)

    budget = options.route_search_budget
    kept = prepared is not None and prepared.serves(snapshot, budget)
    if prepared is None or not kept:
        prepared = Prepared(snapshot, budget)
    catalog, nominator = prepared.for_cycle()
    holders, ledger = _holders_and_ledger(catalog, live.holding, prepared if kept else None)

    # Sorting makes every later phase independent of the snapshot's input order.
    pending = sorted(live.pending, key=lambda r: (r.created_at, r.id.int))
    candidates: list[Candidate] = []
    rejections: list[Rejection] = []
    for request in pending:
        nominated = nominator.nominate(request)
        if isinstance(nominated, str):
            rejections.append(Rejection(request.id, nominated))
        else:
            candidates.append(nominated)

    fitter = Fitter(catalog, ledger, options.route_search_budget)
    admitter = Admitter(catalog=catalog, fitter=fitter, holders=holders, trace=trace)
    if kept:
        # Its next update finds what these admissions hold (continuations add to it too).
        prepared.holder_state.admitted = admitter.held
    admitter.run(candidates)

    decisions = CycleDecisions(
        now=now,
        expiries=tuple(sorted(expiries, key=lambda e: e.request_id.int)),
        admissions=tuple(admitter.admissions),
        preemptions=tuple(admitter.preemptions),
        rejections=tuple(sorted(rejections, key=lambda r: r.request_id.int)),
        waits=tuple(
            sorted(
                admitter.waits(candidates, options.unchanged_waits),
                key=lambda w: w.request_id.int,
            )
        ),
        stats={
            "requests": len(snapshot.requests),
            "pending": len(candidates) + len(rejections),
            "holders": len(holders.by_id),
            "routes_tried": fitter.routes_tried,
            "memo_hits": fitter.memo_hits,
        },
    )
    return CycleRun(
        decisions=decisions,
        catalog=catalog,
        holders=holders,
        ledger=ledger,
        candidates=candidates,
        admitter=admitter,
        nominator=nominator,
        continuable=not (expiries or admitter.admissions or admitter.preemptions),
    )


def _holders_and_ledger(
    catalog: Catalog, holding: Sequence[ResourceRequest], kept: Prepared | None
) -> tuple[HolderIndex, Ledger]:
    """The cycle's holders and a ledger of their usage: from the holder state a caller's
    :class:`Prepared` keeps between cycles when it can, else built from scratch."""
    if kept is not None:
        index = kept.holder_state.update(holding)
        if index is not None:
            ledger = kept.holder_state.ledger.copy()
            ledger.catalog = catalog
            return index, ledger
    index = build_holders(catalog, holding)  # before the ledger: it may add stand-in policies
    ledger = Ledger(catalog)
    for holder in index.by_id.values():
        ledger.add(holder.holding, returning=holder.preempting)
    return index, ledger


def schedule(
    snapshot: Snapshot,
    now: datetime,
    options: SchedulerOptions | None = None,
    *,
    prepared: Prepared | None = None,
) -> CycleDecisions:
    """Run one scheduling cycle over ``snapshot`` at server time ``now``.

    Admissions and preemptions are listed in the order they were decided (pool rank, then
    queue order), which is itself deterministic; the other collections are sorted by id.
    ``prepared`` only saves work: the decisions are the same with or without it.
    """
    return run_cycle(snapshot, now, options, prepared=prepared).decisions
