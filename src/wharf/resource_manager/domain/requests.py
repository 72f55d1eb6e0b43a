"""Resource requests, their demands, and the allocations made for them.

Owns :class:`Demand`, :class:`ResourceRequest`, :class:`Allocation`. A request asks for all of
its demands at once, on behalf of its subjects, and is admitted all-or-nothing: one allocation
per demand (plus grant-default allocations, whose ``demand_index`` is None), all from one pool
and one policy.

Invariants:
- demands name something (a resource, a kind or a resource selector) and quantities are
  positive integers in the demand's unit; ``pool`` (id or name) and ``pool_selector`` are
  mutually exclusive;
- timestamps are timezone-aware and come from the server's clock only;
- allocations carry both the requested ``quantity``/``unit`` and the exact ``base_quantity``.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    model_validator,
)

from wharf.core.enums import ReclaimTolerance, ResourceRequestRuntimeState, ResourceRequestStatus
from wharf.core.resources import ResourceDemand
from wharf.resource_manager.domain.errors import load
from wharf.resource_manager.domain.pools import TargetSettings
from wharf.resource_manager.domain.selectors import AttributeSelector, SubjectSelector
from wharf.resource_manager.domain.subjects import SubjectChain

HOLDING_STATUSES: frozenset[ResourceRequestStatus] = frozenset(
    {ResourceRequestStatus.ALLOCATED, ResourceRequestStatus.PREEMPTING}
)
"""Statuses whose allocations count against capacity."""


class Demand(BaseModel):
    """One thing a request needs, as the Resource Manager holds it: the one demand model
    (:class:`wharf.core.resources.ResourceDemand`) with its selectors parsed into
    :class:`AttributeSelector` trees the scheduler matches, and a :meth:`signature` that
    shares work between identical demands. Stored in ``rm_requests.demands`` and returned in
    responses. Built only by :meth:`from_core` (or from stored rows)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    resource: str | None = Field(default=None, min_length=1)
    """Exact descriptor name."""
    kind: str | None = Field(default=None, min_length=1, max_length=64)
    resource_selector: AttributeSelector | None = None
    quantity: PositiveInt
    unit: str | None = Field(default=None, min_length=1, max_length=64)
    class_name: str | None = Field(default=None, alias="class", min_length=1)
    class_selector: AttributeSelector | None = None

    @model_validator(mode="after")
    def _names_something(self) -> Demand:
        if self.resource is None and self.kind is None and self.resource_selector is None:
            raise ValueError(
                "Resource demands require a resource name, resource kind, or resource selector."
            )
        if self.class_name is not None and self.class_selector is not None:
            raise ValueError("Give either class or class_selector, not both.")
        return self

    @classmethod
    def from_core(cls, demand: ResourceDemand) -> Demand:
        """The one conversion from the one demand model (settings, clients, the wire): its
        selectors parsed; malformed input raises InputError."""
        return load(cls, demand.model_dump(by_alias=True, exclude_none=True))

    def signature(self) -> tuple[Any, ...]:
        """Hashable identity used to share work between identical demands."""
        return (
            self.resource,
            self.kind,
            self.resource_selector.model_dump_json() if self.resource_selector else None,
            self.quantity,
            self.unit,
            self.class_name,
            self.class_selector.model_dump_json() if self.class_selector else None,
        )


class Allocation(BaseModel):
    """What one demand (or one grant default) got: an exact quantity of one class of one pool."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    id: UUID
    request_id: UUID
    demand_index: NonNegativeInt | None
    """Index into the request's demands; None for a grant-default allocation."""
    pool_id: UUID
    class_name: str = Field(alias="class")
    resource: str
    resource_kind: str
    quantity: PositiveInt
    unit: str
    base_quantity: PositiveInt
    policy_id: UUID
    priority: int
    priority_lane: bool = False
    target_settings: TargetSettings = Field(default_factory=dict)
    """Merged pool < class < policy < grant."""


class ResourceRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: UUID
    subjects: tuple[SubjectChain, ...] = Field(min_length=1)
    demands: tuple[Demand, ...] = Field(min_length=1)
    pool: str | None = Field(default=None, min_length=1)
    """Pool id or name; restricts the request to that pool."""
    pool_selector: AttributeSelector | None = None
    reclaim_tolerance: ReclaimTolerance = ReclaimTolerance.NONE
    metadata: dict[str, str] = Field(default_factory=dict)
    preemption_group: SubjectSelector | None = None
    """Allocations whose subjects match this selector are never preempted for this request."""
    status: ResourceRequestStatus = ResourceRequestStatus.PENDING
    status_reason: str | None = None
    runtime_state: ResourceRequestRuntimeState = ResourceRequestRuntimeState.UNKNOWN
    created_at: AwareDatetime
    """Enqueue time: the FIFO key."""
    lease_expires_at: AwareDatetime | None = None
    """None: the request holds no lease and never lapses."""
    allocation_deadline: AwareDatetime | None = None
    """A pending request still waiting at this time expires."""
    renewed_at: AwareDatetime | None = None
    allocated_at: AwareDatetime | None = None
    released_at: AwareDatetime | None = None
    preemption_initiated_by_id: UUID | None = None
    allocations: tuple[Allocation, ...] = ()

    @model_validator(mode="after")
    def _one_pool_route(self) -> ResourceRequest:
        if self.pool is not None and self.pool_selector is not None:
            raise ValueError("Give either pool or pool_selector, not both.")
        return self

    @property
    def holds_capacity(self) -> bool:
        return self.status in HOLDING_STATUSES
