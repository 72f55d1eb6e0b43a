"""Canonical resource demands and byte units, shared by the SDK and the Resource Manager.

A canonical demand names what is wanted (a resource by name, a kind, or a selector) and how
much, in a unit of that resource. Quantities are positive integers.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

BASIC_RESOURCE_KINDS = frozenset({"cpu", "gpu", "memory"})


class ByteUnit(StrEnum):
    B = "B"
    KB = "KB"
    KIB = "KiB"
    MB = "MB"
    MIB = "MiB"
    GB = "GB"
    GIB = "GiB"
    TB = "TB"
    TIB = "TiB"
    PB = "PB"
    PIB = "PiB"

    @property
    def byte_value(self) -> int:
        if self is ByteUnit.B:
            return 1
        order = ["K", "M", "G", "T", "P"].index(self.value[0]) + 1
        base = 1024 if self.value.endswith("iB") else 1000
        return int(base**order)


MEMORY_PATTERN = r"^[0-9]+(" + "|".join(u.value for u in ByteUnit) + r")$"


def parse_memory(value: str) -> tuple[int, ByteUnit]:
    """Split ``"2GiB"`` into ``(2, ByteUnit.GIB)``; longest unit suffix first ("KB" ends in "B")."""
    for unit in sorted(ByteUnit, key=lambda u: -len(u.value)):
        if value.endswith(unit.value):
            number = value[: -len(unit.value)]
            if number.isdigit():
                return int(number), unit
    raise ValueError(f"Unable to parse memory unit from '{value}'.")


class ResourceDemand(BaseModel):
    """One canonical demand sent to the Resource Manager."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    resource: str | None = Field(default=None, min_length=1)
    kind: str | None = Field(default=None, min_length=1, max_length=64)
    quantity: PositiveInt
    unit: str | None = Field(default=None, min_length=1, max_length=64)
    class_name: str | None = Field(default=None, alias="class")
    resource_selector: dict[str, Any] | None = None
    class_selector: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _names_something(self) -> ResourceDemand:
        if self.resource is None and self.kind is None and self.resource_selector is None:
            raise ValueError(
                "Resource demands require a resource name, resource kind, or resource selector."
            )
        return self
