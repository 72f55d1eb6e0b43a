"""The scheduling cycle inside a transaction: extend leases after a downtime, expire lapsed
leases, schedule, stage the decisions.

Owns :func:`extend_after_downtime`, :func:`expire_lapsed`, :func:`run_cycle`, which every
transaction of :class:`.batch.BatchRunner` calls in that order under the scheduling lock; the
transaction's flush writes everything, so the whole cycle commits or rolls back as one.

Invariants:
- lapses follow :func:`wharf.resource_manager.domain.lapse`, applied to rows read *under row
  locks*, so a renewal racing with the sweep either commits first or waits for the sweep;
- the scheduler sees the neutral working copy (no leases), so it never expires or extends
  anything itself; a takeover extends leases in SQL before the lapsed ones are read;
- decisions are applied with the scheduler's own :func:`apply_decisions` (the in-memory twin),
  so the service cannot interpret a decision differently from the scheduler's tests.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from sqlalchemy import Connection

from wharf.resource_manager.domain import apply_lapse
from wharf.resource_manager.scheduler import (
    CycleDecisions,
    LiveSplit,
    Prepared,
    SchedulerOptions,
    Snapshot,
    apply_decisions,
    continue_cycle,
)
from wharf.resource_manager.scheduler import run_cycle as scheduler_cycle
from wharf.resource_manager.service import leader, lease_store, request_store
from wharf.resource_manager.service.codec import neutral
from wharf.resource_manager.service.transaction import Tx


def extend_after_downtime(
    conn: Connection, down_since: datetime, now: datetime, sweep_interval: timedelta
) -> int:
    """A takeover: extend every lease that was live at ``down_since`` (the last record of a
    serving instance) by the downtime (:func:`.leader.extended_lease`); the number extended."""
    extensions = []
    for row in request_store.live_leases(conn):
        if row.lease_expires_at is None:
            continue
        lease = leader.extended_lease(row.lease_expires_at, down_since, now, sweep_interval)
        if lease is not None:
            extensions.append((row, lease))
    lease_store.extend_leases(conn, extensions)
    return len(extensions)


def expire_lapsed(tx: Tx, rows: list[request_store.LeaseRow]) -> None:
    """Expire or cancel every live request whose lease or allocation deadline was reached:
    ``rows``, as :func:`request_store.lapsed` read them (under row locks) in ``tx``."""
    if not rows:
        return
    work = tx.work.requests
    unknown = [row.id for row in rows if row.id not in work]
    loaded = request_store.load(tx.conn, unknown) if unknown else {}
    for row in rows:
        current = work.get(row.id)
        if current is None:
            if row.id not in loaded:
                continue
            current = neutral(loaded[row.id].request)
        timed = current.model_copy(
            update={
                "lease_expires_at": row.lease_expires_at,
                "allocation_deadline": row.allocation_deadline,
            }
        )
        lapsed = apply_lapse(timed, tx.now)
        if lapsed is not timed:
            tx.transition(current, neutral(lapsed))
    if tx.work.pending:
        tx.needs_cycle = True  # capacity came back, or the queue changed


def run_cycle(tx: Tx) -> CycleDecisions | None:
    """Schedule the working copy and stage every decision; None when there was nothing to do.

    The scheduler's configuration index (:class:`Prepared`) is reused from the working copy
    while the configuration is unchanged; the scheduler itself checks that it serves the
    snapshot.
    """
    work = tx.work
    appended, work.appended = work.appended, []
    if not work.pending:
        work.walk = None
        return None
    config = tx.configuration()
    walk = work.walk
    if walk is not None and appended:
        # Only requests were created since the last cycle: walk on from it if they queue
        # behind everyone (the scheduler checks), instead of walking the whole queue again.
        continued = continue_cycle(walk, appended, tx.now)
        if continued is not None:
            _stage(tx, continued)
            if not walk.continuable:
                work.walk = None
            tx.decisions = continued
            return continued
    work.walk = None
    # The working copy is live and lease-free, and keeps its requests split by status.
    split = LiveSplit(tuple(work.pending.values()), tuple(work.holding.values()))
    snapshot = Snapshot(
        descriptors=config.descriptors,
        pools=config.pools,
        policies=config.policies,
        requests=split.pending + split.holding,
        split=split,
    )
    budget = tx.options.route_search_budget
    options = SchedulerOptions(
        route_search_budget=budget,
        unchanged_waits=False,  # a wait whose reason did not change changes nothing
    )
    prepared = work.prepared
    if prepared is None or not prepared.serves(snapshot, budget):
        prepared = work.prepared = Prepared(snapshot, budget)
    run = scheduler_cycle(snapshot, tx.now, options, prepared=prepared)
    decisions = run.decisions
    _stage(tx, decisions)
    if run.continuable:
        work.walk = run
    tx.decisions = decisions
    return decisions


def _stage(tx: Tx, decisions: CycleDecisions) -> None:
    work = tx.work.requests
    # The scheduler lists only waits with a new reason (unchanged_waits=False), and a
    # continuation only new requests' waits; the filter keeps staging right whatever it got.
    waits = tuple(w for w in decisions.waits if work[w.request_id].status_reason != w.reason)
    ids = dict.fromkeys(
        [
            *(e.request_id for e in decisions.expiries),
            *(a.request_id for a in decisions.admissions),
            *(p.victim_id for p in decisions.preemptions),
            *(r.request_id for r in decisions.rejections),
            *(w.request_id for w in waits),
        ]
    )
    if not ids:
        return
    before = tuple(work[key] for key in ids)
    touched = Snapshot(descriptors=(), pools=(), policies=(), requests=before)
    changes = dataclasses.replace(decisions, waits=waits)
    after = apply_decisions(touched, changes)
    for old, new in zip(before, after.requests, strict=True):
        tx.transition(old, neutral(new), decided=True)
