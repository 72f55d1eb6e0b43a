"""The scheduler's output: what one cycle decided, for the service to apply in one transaction.

Owns: the decision records and :class:`CycleDecisions`.

Invariants: each request appears in at most one of expiries, admissions, rejections and waits;
a victim appears in ``preemptions`` at most once and is never also a preemptor in the same
cycle; every collection is sorted deterministically, so equal inputs give equal outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from wharf.core.enums import ResourceRequestStatus
from wharf.resource_manager.domain.requests import Allocation


@dataclass(frozen=True, slots=True)
class Expiry:
    request_id: UUID
    previous_status: ResourceRequestStatus
    new_status: ResourceRequestStatus
    reason: str


@dataclass(frozen=True, slots=True)
class Admission:
    request_id: UUID
    pool_id: UUID
    policy_id: UUID
    allocations: tuple[Allocation, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class Preemption:
    victim_id: UUID
    preemptor_id: UUID
    reason: str


@dataclass(frozen=True, slots=True)
class Rejection:
    request_id: UUID
    reason: str


class Wait(NamedTuple):
    """A request that stays pending, and why. A named tuple, not a frozen dataclass like the
    other records: a cycle builds one per waiting request, and a frozen dataclass's
    ``__init__`` (a ``setattr`` per field) cost twice as much."""

    request_id: UUID
    reason: str
    pool_id: UUID | None = None
    """The pool the reason is about (where the request is blocked or queued)."""
    position: int | None = None
    """1-based position in that pool's queue order this cycle."""


@dataclass(frozen=True, slots=True)
class CycleDecisions:
    """What one cycle decided. Status changes implied: admission pending → allocated,
    rejection pending → rejected, preemption allocated → preempting
    (``preemption_initiated_by_id`` = preemptor), expiry as stated; waits change no status (the
    service may store the reason if it changed)."""

    now: datetime
    expiries: tuple[Expiry, ...] = ()
    admissions: tuple[Admission, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    rejections: tuple[Rejection, ...] = ()
    waits: tuple[Wait, ...] = ()
    stats: dict[str, int] = field(default_factory=dict)
    """Counters for metrics and benchmarks (pending, routes tried, memo hits ...)."""

    @property
    def decision_count(self) -> int:
        """Status-changing decisions: expiries, admissions, preemptions, rejections."""
        return (
            len(self.expiries) + len(self.admissions) + len(self.preemptions) + len(self.rejections)
        )
