"""Pools and their capacity classes.

Owns :class:`Reclaimable`, :class:`CapacityClass`, :class:`Pool`, :func:`validate_pool` and the
tolerance/class compatibility rule :func:`class_accepts`. A capacity class is a bundle of
descriptor quantities (a node shape, or a GPU model such as ``h100``).

Invariants:
- class names are unique within a pool and each class offers at least one resource;
- quantities are non-negative integers in base units or None (unlimited, but usage is still
  accounted so it shows in the ledger and metrics); concurrency limits are non-negative;
- ranks and limits fit a 32-bit SQL ``INTEGER`` column (:data:`MAX_STORED_INT`), so a huge
  number is an input error, not a database failure;
- a request is placed only in classes its reclaim tolerance accepts (:func:`class_accepts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, model_validator

from wharf.core.enums import ReclaimTolerance
from wharf.core.errors import InputError
from wharf.core.resources import NAME_PATTERN
from wharf.resource_manager.domain.units import AttributeValue, ResourceDescriptor

MAX_STORED_INT = 2_147_483_647
"""The largest rank, limit or weight a pool or policy may have: what every SQL database's
``INTEGER`` column holds."""
StoredInt = Annotated[int, Field(ge=-MAX_STORED_INT, le=MAX_STORED_INT)]
StoredLimit = Annotated[int, Field(ge=0, le=MAX_STORED_INT)]


class Reclaimable(StrEnum):
    NEVER = "never"
    COORDINATED = "coordinated"
    UNSAFE = "unsafe"


_ACCEPTED: Mapping[ReclaimTolerance, frozenset[Reclaimable]] = {
    ReclaimTolerance.NONE: frozenset(Reclaimable),
    ReclaimTolerance.COORDINATED: frozenset({Reclaimable.NEVER, Reclaimable.COORDINATED}),
    ReclaimTolerance.ANY: frozenset(Reclaimable),
}


def class_accepts(reclaimable: Reclaimable, tolerance: ReclaimTolerance) -> bool:
    """Whether a request with ``tolerance`` may be placed in a class that is ``reclaimable``.

    A class's ``reclaimable`` says how its allocations may be taken back: ``never`` (not at
    all), ``coordinated`` (the holder is asked to stop and releases) or ``unsafe`` (may be
    killed). Tolerance ``none`` is accepted by every class, because such a request is never
    preempted wherever it sits; the scheduler admits it into a reclaimable class only within
    its policy's reserved share there (it never borrows), so the capacity other policies
    reserved can always be recovered from reclaimable holders.
    """
    return reclaimable in _ACCEPTED[tolerance]


TargetSettings = dict[str, Any]
"""Settings handed to the component that runs the work (pod labels, node selectors ...)."""


class CapacityClass(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    capacity: dict[str, NonNegativeInt | None] = Field(min_length=1)
    """Resource descriptor name -> quantity in base units (None: unlimited, still accounted)."""
    rank: StoredInt = 0
    """Higher is tried first when a demand names no class."""
    reclaimable: Reclaimable = Reclaimable.NEVER
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    concurrency_limit: StoredLimit | None = None
    """Most requests that may hold an allocation in this class at once."""
    target_settings: TargetSettings = Field(default_factory=dict)


class Pool(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: UUID
    name: str = Field(pattern=NAME_PATTERN)
    rank: StoredInt = 0
    """Higher is tried first when several pools could admit a request."""
    classes: tuple[CapacityClass, ...] = Field(min_length=1)
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    concurrency_limit: StoredLimit | None = None
    """Most requests that may hold an allocation in this pool at once."""
    target_settings: TargetSettings = Field(default_factory=dict)
    fair_sharing: bool = False
    """Order equal-priority requests by their policy's dominant resource share (Kueue-style)."""

    @model_validator(mode="after")
    def _unique_classes(self) -> Pool:
        names = [item.name for item in self.classes]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"Duplicate capacity class names: {', '.join(duplicates)}.")
        return self

    def capacity_class(self, name: str) -> CapacityClass | None:
        return next((item for item in self.classes if item.name == name), None)


def validate_pool(pool: Pool, descriptors: Mapping[str, ResourceDescriptor]) -> None:
    """InputError unless every resource a class offers is a known descriptor."""
    for capacity_class in pool.classes:
        for resource in capacity_class.capacity:
            if resource not in descriptors:
                raise InputError(
                    f"Pool '{pool.name}' class '{capacity_class.name}' offers unknown resource "
                    f"'{resource}'; known resources: {', '.join(sorted(descriptors))}."
                )
