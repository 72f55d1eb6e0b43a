"""The one resource demand model and byte units, shared by settings, the engine and the RM.

Owns :class:`ResourceDemand`, :class:`ByteUnit`, :func:`parse_memory` and :data:`NAME_PATTERN`
(descriptor, pool and class names).

Invariants: one model, two stable spellings (Python and stored settings: ``name``,
``class_name``; the RM's wire: ``resource``, ``class``); a demand names something and its
quantity is a strict positive ``int``. Selectors are plain JSON here; the RM parses them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$"
"""Names of resources, pools and capacity classes."""


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


ResourceName = Annotated[str, Field(pattern=NAME_PATTERN)]
Selector = dict[str, Any]
"""A pool/class/resource selector as JSON; the Resource Manager parses and checks it."""


class ResourceDemand(BaseModel):
    """One thing a step or a request needs: which resource, how much, optionally which class.

    ``quantity`` is in ``unit`` (the resource's default unit when omitted); ``kind`` is a
    resource kind (see :mod:`wharf.core.resource_kinds`).

    Field names (``name``, ``class_name``) are the Python and stored-settings spelling, aliases
    (``resource``, ``class``, ``by_alias=True``) the RM wire's; both are accepted when
    validating, and the wire field order is the RM contract's, so request bodies stay
    byte-identical. A demand names a resource, a kind or a resource selector, never both a class
    and a class selector; its quantity is a strict positive ``int`` (``1.5`` or ``true`` is an
    input error, never rounded). Selectors stay plain JSON; the RM domain's
    ``Demand.from_core`` is the one conversion.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: ResourceName | None = Field(default=None, alias="resource")
    """Exact resource (descriptor) name; ``resource`` on the wire."""
    kind: str | None = Field(default=None, min_length=1, max_length=64)
    resource_selector: Selector | None = None
    quantity: int = Field(default=1, strict=True, gt=0)
    unit: str | None = Field(default=None, min_length=1, max_length=64)
    class_name: ResourceName | None = Field(default=None, alias="class")
    class_selector: Selector | None = None

    @field_validator("resource_selector", "class_selector", mode="before")
    @classmethod
    def _selector_as_json(cls, value: Any) -> Any:
        # A parsed selector model (the RM's AttributeSelector) travels as its own dump.
        return value.model_dump(by_alias=True) if isinstance(value, BaseModel) else value

    @model_validator(mode="before")
    @classmethod
    def _one_class_as_written(cls, data: Any) -> Any:
        # Named as its writer spelled it: ``class_name`` in Python and stored settings, ``class``
        # on the RM wire (the check after validation no longer knows which).
        if isinstance(data, dict) and data.get("class_selector") is not None:
            for written in ("class_name", "class"):
                if data.get(written) is not None:
                    raise ValueError(f"Give either {written} or class_selector, not both.")
        return data

    @model_validator(mode="after")
    def _names_something(self) -> ResourceDemand:
        if self.name is None and self.kind is None and self.resource_selector is None:
            raise ValueError(
                "Resource demands require a resource name, resource kind, or resource selector."
            )
        if self.class_name is not None and self.class_selector is not None:
            raise ValueError("Give either class_name or class_selector, not both.")
        return self
