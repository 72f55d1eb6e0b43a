"""Every reason text the scheduler writes, in one place.

Owns: the canonical sentences (``NO_POLICY_MATCHES`` ...) and the builders that add details.

Invariant: each rejection or wait starts with a stable, canonical sentence that clients and
tests may match on; details follow in further sentences, amounts rendered for people
(``8 GPU``, ``23.5 GiB``: :func:`~wharf.resource_manager.domain.units.format_human`).
"""

from __future__ import annotations

from collections.abc import Sequence

from wharf.resource_manager.domain.subjects import SubjectChain, SubjectType
from wharf.resource_manager.domain.units import format_human
from wharf.resource_manager.scheduler.catalog import Catalog, PolicyView, SlotInfo

NO_POLICY_MATCHES = "No resource policy matches any of the request subjects."
NO_POLICY_ADMITTED = "No resource policy admitted this request."
NO_RESERVED_SHARE_FOR_NONE = (
    "No grant reserved share satisfies this request with reclaim_tolerance 'none'."
)
NO_POOL_MATCHES_SELECTOR = "No resource pool matches the request's pool selector."
ADMITTED = "Admitted."
PREEMPTED_FOR = "Preempted to free resources for request {preemptor}: {why}."


def amount(slot: SlotInfo, base: int | None) -> str:
    return format_human(slot.descriptor, base)


def amount_of(slot: SlotInfo, base: int | None) -> str:
    """``8 GiB of memory``, but ``2 GPU`` where the unit already names the resource."""
    text = amount(slot, base)
    return text if text.endswith(f" {slot.resource}") else f"{text} of {slot.resource}"


def where(catalog: Catalog, slot: SlotInfo) -> str:
    pool = catalog.pools[slot.pool_index].pool.name
    return f"class '{slot.class_name}' of pool '{pool}'"


def _account(subjects: Sequence[SubjectChain]) -> str | None:
    return next(
        (
            node.subject_id
            for chain in subjects
            for node in chain.nodes
            if node.subject_type is SubjectType.ACCOUNT
        ),
        None,
    )


def _add_one(account: str | None, pool: str | None) -> str:
    subject = f"--subject-id {account}" if account else "--subject-id ID"
    return (
        "a Resource Manager administrator can add one: wharf policy create NAME "
        f"--pool {pool or 'POOL'} --subject-type account {subject} (without --subject-id: "
        "every account)."
    )


def no_policy_matches(subjects: Sequence[SubjectChain], pools: Sequence[str]) -> str:
    """Why nothing admits the request, who can fix it and how: ``pools`` are the names of the
    pools the request may use."""
    account = _account(subjects)
    who = f"account '{account}'" if account else "the request's subjects"
    pool = pools[0] if len(pools) == 1 else None
    where = f"pool '{pool}'" if pool else "any pool"
    return f"{NO_POLICY_MATCHES} No policy lets {who} use {where}; {_add_one(account, pool)}"


def no_policy_in(subjects: Sequence[SubjectChain], pools: Sequence[str]) -> str:
    """The pools that offer what a request demands though no policy opens them to it (the
    policies it matches are of pools that do not), who can fix it and how."""
    account = _account(subjects)
    who = f"account '{account}'" if account else "the request's subjects"
    named = ", ".join(f"'{pool}'" for pool in pools[:5]) + (", ..." if len(pools) > 5 else "")
    pool_offers = "Pool {} offers" if len(pools) == 1 else "Pools {} offer"
    return (
        f"{pool_offers.format(named)} it, but no policy there lets {who} use it; "
        f"{_add_one(account, pools[0])}"
    )


def unknown_pool(pool: str) -> str:
    return f"Resource pool '{pool}' does not exist."


def admitted(catalog: Catalog, policy: PolicyView) -> str:
    pool = catalog.pools[policy.pool_index].pool.name
    return f"Admitted to pool '{pool}' by policy '{policy.policy.name}'."


def waiting_capacity(catalog: Catalog, slot: SlotInfo, needed: int, free: int) -> str:
    return (
        f"Waiting for capacity: needs {amount_of(slot, needed)} in {where(catalog, slot)}, "
        f"{amount(slot, free)} free."
    )


def waiting_limit(catalog: Catalog, policy: PolicyView, slot: SlotInfo, used: int) -> str:
    limit = policy.limit[slot.index]
    return (
        f"Waiting for policy '{policy.policy.name}' limit: {amount(slot, used)} of "
        f"{amount_of(slot, limit)} in {where(catalog, slot)} in use."
    )


def waiting_share(catalog: Catalog, policy: PolicyView, slot: SlotInfo) -> str:
    return (
        f"Waiting for policy '{policy.policy.name}' reserved share or unreserved capacity of "
        f"{slot.resource} in {where(catalog, slot)}, which is never reclaimable."
    )


def waiting_pinned_share(catalog: Catalog, policy: PolicyView, slot: SlotInfo) -> str:
    return (
        f"Waiting for policy '{policy.policy.name}' reserved share of {slot.resource} in "
        f"{where(catalog, slot)}: reclaim_tolerance 'none' never borrows in a reclaimable class."
    )


def waiting_concurrency(scope: str, limit: int) -> str:
    return f"Waiting for a free slot: the concurrency limit {limit} of {scope} is reached."


def waiting_behind(catalog: Catalog, slot: SlotInfo, head: str) -> str:
    return (
        f"Waiting behind request {head}, which holds the claim on {slot.resource} in "
        f"{where(catalog, slot)}."
    )


def waiting_returning(count_hint: str) -> str:
    return f"Waiting for preempted allocations to release capacity ({count_hint})."


def preempting(catalog: Catalog, pool_index: int, count: int) -> str:
    pool = catalog.pools[pool_index].pool.name
    noun = "allocation" if count == 1 else "allocations"
    return f"Preempting {count} {noun} to make room in pool '{pool}'."


def deferred_to(catalog: Catalog, pool_index: int) -> str:
    return f"Blocked here; trying pool '{catalog.pools[pool_index].pool.name}' where it fits."


def search_exhausted(policy: PolicyView) -> str:
    return (
        f"Waiting: no class assignment of policy '{policy.policy.name}' fits within the "
        "search budget."
    )
