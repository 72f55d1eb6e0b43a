"""Resource policies and their grants, and the rules checked when they are saved.

Owns :class:`Policy`, :class:`Grant`, :class:`GrantResource`, :class:`MissingAction`,
:func:`validate_policy`, :func:`validate_reserved_totals`. A policy says which subjects
(selector) may use which pool, at what priority, with what grants (one per capacity class); a
policy without grants admits to every class with reserved 0 and limit = class quantity.

Invariants:
- Σ reserved over all policies of a pool ≤ capacity, per (class, resource)
  (:func:`validate_reserved_totals`, run on every save of a policy or pool);
- reserved ≤ limit ≤ class quantity; grant classes exist in the pool and grant resources are
  offered by the class; one grant per class;
- a priority-lane policy outranks every normal priority (:data:`PRIORITY_LANE_PRIORITY`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Annotated
from uuid import UUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    model_validator,
)

from wharf.core.errors import InputError
from wharf.core.resources import NAME_PATTERN
from wharf.resource_manager.domain.pools import MAX_STORED_INT, Pool, StoredLimit, TargetSettings
from wharf.resource_manager.domain.selectors import SubjectSelector
from wharf.resource_manager.domain.units import ResourceDescriptor, format_human

PRIORITY_LANE_PRIORITY = MAX_STORED_INT
"""The effective priority of a priority-lane policy (as in ZenML's transport models)."""


class MissingAction(StrEnum):
    """What a grant does with a resource the request does not demand."""

    OMIT = "omit"
    """Nothing: the request gets none of it."""
    DEFAULT = "default"
    """Allocate ``default_value`` of it anyway (a grant-default allocation)."""
    REJECT = "reject"
    """This grant cannot admit the request."""


class GrantResource(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    reserved: NonNegativeInt = 0
    """Guaranteed share: others may borrow it while it is unused, and it is reclaimed by
    preemption."""
    limit: NonNegativeInt | None = None
    """Hard cap for the policy in this class; None means the class quantity."""
    missing_action: MissingAction = MissingAction.OMIT
    default_value: PositiveInt | None = None
    """Base units allocated when the request omits the resource and the action is ``default``."""

    @model_validator(mode="after")
    def _consistent(self) -> GrantResource:
        if self.limit is not None and self.reserved > self.limit:
            raise ValueError(f"reserved ({self.reserved}) is above limit ({self.limit}).")
        if (self.missing_action is MissingAction.DEFAULT) != (self.default_value is not None):
            raise ValueError("default_value is required exactly when missing_action is 'default'.")
        return self


class Grant(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    class_name: str = Field(pattern=NAME_PATTERN)
    resources: dict[str, GrantResource] = Field(default_factory=dict)
    """Per resource; a class resource not listed here has reserved 0 and limit = quantity."""
    target_settings: TargetSettings = Field(default_factory=dict)


class Policy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: UUID
    name: str = Field(pattern=NAME_PATTERN)
    pool_id: UUID
    subject_selector: SubjectSelector
    priority: int = Field(default=0, ge=-PRIORITY_LANE_PRIORITY, lt=PRIORITY_LANE_PRIORITY)
    priority_lane: bool = False
    """Queued before everything else; may preempt normal work; is never preempted."""
    preemption_group: str | None = Field(default=None, min_length=1)
    """Allocations admitted by policies of the same group never preempt each other."""
    concurrency_limit: StoredLimit | None = None
    """Most requests this policy may have allocated at once."""
    grants: tuple[Grant, ...] = ()
    target_settings: TargetSettings = Field(default_factory=dict)
    fair_share_weight: Annotated[int, Field(gt=0, le=MAX_STORED_INT)] = 1
    """Weight of this policy's share when its pool uses fair sharing."""

    @model_validator(mode="after")
    def _one_grant_per_class(self) -> Policy:
        names = [grant.class_name for grant in self.grants]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"More than one grant for class: {', '.join(duplicates)}.")
        return self

    @property
    def effective_priority(self) -> int:
        return PRIORITY_LANE_PRIORITY if self.priority_lane else self.priority

    def grant_for(self, class_name: str) -> Grant | None:
        return next((grant for grant in self.grants if grant.class_name == class_name), None)


def _describe(
    descriptors: Mapping[str, ResourceDescriptor] | None, resource: str, amount: int | None
) -> str:
    descriptor = descriptors.get(resource) if descriptors else None
    if descriptor is None:
        return "unlimited" if amount is None else str(amount)
    return format_human(descriptor, amount)


def validate_policy(
    policy: Policy, pool: Pool, descriptors: Mapping[str, ResourceDescriptor] | None = None
) -> None:
    """InputError unless ``policy`` is consistent with ``pool`` on its own."""
    if policy.pool_id != pool.id:
        raise InputError(f"Policy '{policy.name}' belongs to another pool than '{pool.name}'.")
    for grant in policy.grants:
        capacity_class = pool.capacity_class(grant.class_name)
        if capacity_class is None:
            raise InputError(
                f"Policy '{policy.name}' grants class '{grant.class_name}', which pool "
                f"'{pool.name}' does not have."
            )
        for resource, entry in grant.resources.items():
            if resource not in capacity_class.capacity:
                raise InputError(
                    f"Policy '{policy.name}' grants resource '{resource}' in class "
                    f"'{grant.class_name}', which does not offer it."
                )
            quantity = capacity_class.capacity[resource]
            for label, amount in (("reserved", entry.reserved), ("limit", entry.limit)):
                if quantity is not None and amount is not None and amount > quantity:
                    raise InputError(
                        f"Policy '{policy.name}' {label} "
                        f"{_describe(descriptors, resource, amount)} in class "
                        f"'{grant.class_name}' is above its capacity of "
                        f"{_describe(descriptors, resource, quantity)}."
                    )


def validate_reserved_totals(
    pool: Pool,
    policies: Iterable[Policy],
    descriptors: Mapping[str, ResourceDescriptor] | None = None,
) -> None:
    """InputError unless Σ reserved ≤ capacity for every (class, resource) of ``pool``, so
    every reserved share can be honoured at once.

    Pass the policies as they would be after the save (including the new or changed one).
    """
    totals: dict[tuple[str, str], int] = {}
    for policy in policies:
        if policy.pool_id != pool.id:
            continue
        validate_policy(policy, pool, descriptors)
        for grant in policy.grants:
            for resource, entry in grant.resources.items():
                key = (grant.class_name, resource)
                totals[key] = totals.get(key, 0) + entry.reserved
    for (class_name, resource), total in sorted(totals.items()):
        capacity_class = pool.capacity_class(class_name)
        quantity = capacity_class.capacity.get(resource) if capacity_class else 0
        if quantity is not None and total > quantity:
            raise InputError(
                f"Reserved {resource} in class '{class_name}' of pool '{pool.name}' would total "
                f"{_describe(descriptors, resource, total)}, above its capacity of "
                f"{_describe(descriptors, resource, quantity)}."
            )
