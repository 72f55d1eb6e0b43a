"""How far a pool's slot gets towards admitting one demand (:func:`stage_of`), and the rejection
text of the furthest miss (:func:`failure_message`).

Invariant: the stages are ordered as the rules are checked, so the highest stage a policy's
slots reach is the most useful thing to tell the requester.
"""

from __future__ import annotations

from wharf.core.enums import ReclaimTolerance
from wharf.resource_manager.domain.pools import class_accepts
from wharf.resource_manager.domain.requests import Demand
from wharf.resource_manager.scheduler import reasons
from wharf.resource_manager.scheduler.catalog import Catalog, PolicyView

OFFERED, CLASS, GRANT, TOLERANCE, CAPACITY, LIMIT, SHARE = range(7)
RESERVED = frozenset({TOLERANCE, SHARE})
"""Stages at which only a reserved share could have admitted the demand."""


def stage_of(
    catalog: Catalog,
    policy: PolicyView,
    demand: Demand,
    tolerance: ReclaimTolerance,
    *,
    slot: int,
    base: int,
) -> int | None:
    """The first static rule a slot breaks for a demand (None: it qualifies)."""
    info = catalog.slots[slot]
    spec = catalog.classes[info.class_index].spec
    if demand.class_name is not None and spec.name != demand.class_name:
        return CLASS
    if demand.class_selector is not None and not demand.class_selector.matches(
        spec.name, spec.attributes
    ):
        return CLASS
    if policy.grants and info.class_index not in policy.grants:
        return GRANT
    if not class_accepts(spec.reclaimable, tolerance):
        return TOLERANCE
    if info.capacity is not None and base > info.capacity:
        return CAPACITY
    if slot in policy.limit and base > policy.limit[slot]:
        return LIMIT
    if info.capacity is not None:
        reserved = policy.reserved.get(slot, 0)
        if info.protected:
            if max(0, base - reserved) > info.unreserved_or_zero:
                return SHARE
        elif tolerance is ReclaimTolerance.NONE and base > reserved:
            return SHARE
    return None


def failure_message(
    catalog: Catalog,
    policy: PolicyView,
    demand: Demand,
    *,
    tolerance: ReclaimTolerance,
    index: int,
    stage: int,
    slot: int,
    base: int,
) -> str:
    """Built only for the failure that is reported: formatting amounts is not free."""
    info = catalog.slots[slot]
    name = info.class_name
    shown = reasons.amount(info, base)
    if stage == CLASS:
        asked = f"named '{demand.class_name}'" if demand.class_name else "matching its selector"
        return f"no class {asked} offers the resource of demand #{index}"
    if stage == GRANT:
        return f"it grants no class offering demand #{index}"
    if stage == TOLERANCE:
        return f"no class offering demand #{index} accepts reclaim_tolerance '{tolerance.value}'"
    if stage == CAPACITY:
        capacity = reasons.amount(info, info.capacity)
        return f"demand #{index} ({shown}) exceeds the capacity of class '{name}' ({capacity})"
    if stage == LIMIT:
        limit = reasons.amount(info, policy.limit[slot])
        return f"demand #{index} ({shown}) exceeds its limit in class '{name}' ({limit})"
    reserved = reasons.amount(info, policy.reserved.get(slot, 0))
    if not info.protected:
        return (
            f"demand #{index} ({shown}) exceeds its reserved share ({reserved}) of reclaimable "
            f"class '{name}', and reclaim_tolerance 'none' never borrows"
        )
    unreserved = reasons.amount(info, info.unreserved_or_zero)
    return (
        f"demand #{index} ({shown}) fits neither its reserved share ({reserved}) nor the "
        f"unreserved capacity ({unreserved}) of never-reclaimable class '{name}'"
    )
