"""The scheduler's input: an immutable snapshot of the Resource Manager's state, and options.

Owns: :class:`Snapshot`, :class:`SchedulerOptions`.

Invariants: a snapshot is never mutated by the scheduler; ids are unique within each
collection (checked by :meth:`Snapshot.of`); requests in terminal statuses may be present and
are ignored. The service builds it inside the transaction that applies the cycle's decisions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from wharf.core.errors import InputError
from wharf.resource_manager.domain.policies import Policy
from wharf.resource_manager.domain.pools import Pool
from wharf.resource_manager.domain.requests import ResourceRequest
from wharf.resource_manager.domain.units import STOCK_DESCRIPTORS, ResourceDescriptor


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    route_search_budget: int = 256
    """Most partial class assignments tried per (request, policy) before giving up; bounds the
    cost of requests with many demands and many candidate classes."""
    unchanged_waits: bool = True
    """List a wait also when its reason is the request's ``status_reason`` already. A caller
    that only applies decisions (the service) sets False: in a deep queue most waits are
    unchanged from one cycle to the next, and listing them cost a third of a release's
    cycle. Positions (``Wait.position``) are then only known for the waits listed."""


class LiveSplit(NamedTuple):
    """A snapshot's requests as a caller that keeps them apart already has them."""

    pending: tuple[ResourceRequest, ...]
    holding: tuple[ResourceRequest, ...]
    """Allocated or preempting."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    descriptors: tuple[ResourceDescriptor, ...]
    pools: tuple[Pool, ...]
    policies: tuple[Policy, ...]
    requests: tuple[ResourceRequest, ...]
    split: LiveSplit | None = None
    """Optional, from a caller that keeps its requests apart (the service's working copy):
    exactly :attr:`requests`, every one live and lease-free (no lease, no allocation
    deadline), split by status. A cycle then reads no request outside the queue, so with
    thousands of allocations live an event does not touch each of them. Trusted, not checked:
    the decisions are those of the same snapshot without it."""

    @classmethod
    def of(
        cls,
        *,
        pools: Iterable[Pool],
        policies: Iterable[Policy],
        requests: Iterable[ResourceRequest],
        descriptors: Iterable[ResourceDescriptor] = STOCK_DESCRIPTORS,
    ) -> Snapshot:
        """Build a snapshot, rejecting duplicate ids or names (InputError)."""
        snapshot = cls(
            descriptors=tuple(descriptors),
            pools=tuple(pools),
            policies=tuple(policies),
            requests=tuple(requests),
        )
        _unique("resource descriptor", [d.name for d in snapshot.descriptors])
        _unique("pool id", [str(p.id) for p in snapshot.pools])
        _unique("pool name", [p.name for p in snapshot.pools])
        _unique("policy id", [str(p.id) for p in snapshot.policies])
        _unique("request id", [str(r.id) for r in snapshot.requests])
        return snapshot


def _unique(label: str, values: list[str]) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise InputError(f"Duplicate {label} in snapshot: {value}.")
        seen.add(value)
