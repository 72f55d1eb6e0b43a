"""Resource descriptors, their units, and exact integer quantities.

Owns :class:`Unit`, :class:`ResourceDescriptor`, the stock descriptors (``CPU``, ``memory``,
``GPU``: one per first-class kind of :mod:`wharf.core.resource_kinds`, built by
:func:`descriptor_of`) and the conversion API (:class:`Quantity`, :func:`to_base`,
:func:`parse_quantity`, :func:`format_base`, and :func:`format_human` for people).

Invariants: every quantity the Resource Manager stores or compares is a non-negative ``int`` in
the descriptor's base unit, converted exactly (a value that is no whole number of base units is
rejected, never rounded); a descriptor has exactly one base unit, unique case-sensitive unit
names (``mCPU`` is not ``MCPU``) and positive integer multipliers; errors are
:class:`~wharf.core.errors.InputError` naming the resource and listing the known units.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from wharf.core import resource_kinds as kinds
from wharf.core.errors import InputError
from wharf.core.resource_kinds import FIRST_CLASS_KINDS, ResourceKind
from wharf.core.resources import NAME_PATTERN

KIND_PATTERN = r"^[a-z][a-z0-9_\-]{0,63}$"

AttributeValue = str | int | bool
"""Attribute values are JSON scalars so selectors can compare them exactly."""


class Unit(BaseModel):
    """A named unit: ``quantity_in_base = quantity * multiplier``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=64)
    multiplier: PositiveInt


class ResourceDescriptor(BaseModel):
    """A resource that pools offer and requests demand (``GPU``, ``memory``, ``license``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    kind: str = Field(pattern=KIND_PATTERN)
    """``cpu``, ``memory``, ``gpu`` or a custom kind such as ``license``."""
    units: tuple[Unit, ...] = Field(min_length=1)
    default_unit: str | None = None
    """Unit assumed when a demand names none; the base unit when unset."""
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    description: str = ""

    @model_validator(mode="after")
    def _check_units(self) -> ResourceDescriptor:
        names = [unit.name for unit in self.units]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"Duplicate unit names: {', '.join(duplicates)}.")
        if sum(1 for unit in self.units if unit.multiplier == 1) != 1:
            raise ValueError("A resource descriptor needs exactly one base unit (multiplier 1).")
        if self.default_unit is not None and self.default_unit not in names:
            raise ValueError(
                f"Default unit '{self.default_unit}' is not one of the units: {', '.join(names)}."
            )
        return self

    @property
    def base_unit(self) -> Unit:
        return next(unit for unit in self.units if unit.multiplier == 1)

    @property
    def unit_names(self) -> tuple[str, ...]:
        return tuple(unit.name for unit in self.units)

    def multiplier(self, unit: str | None) -> int:
        """The multiplier of ``unit`` (the default unit when None); InputError if unknown."""
        name = unit if unit is not None else (self.default_unit or self.base_unit.name)
        for candidate in self.units:
            if candidate.name == name:
                return candidate.multiplier
        raise InputError(
            f"Unknown unit '{name}' for resource '{self.name}'; "
            f"known units: {', '.join(self.unit_names)}."
        )

    def has_unit(self, unit: str | None) -> bool:
        return unit is None or unit in self.unit_names


def to_base(descriptor: ResourceDescriptor, quantity: Any, unit: str | None = None) -> int:
    """``quantity`` ``unit`` of ``descriptor`` as an exact integer of base units.

    Rejects booleans, floats (even ``2.0``: callers must not rely on float exactness),
    negative values and unknown units.
    """
    if isinstance(quantity, bool) or not isinstance(quantity, int):
        raise InputError(
            f"Quantity of resource '{descriptor.name}' must be a whole number, got {quantity!r}."
        )
    if quantity < 0:
        raise InputError(
            f"Quantity of resource '{descriptor.name}' must not be negative, got {quantity}."
        )
    base: int = quantity * descriptor.multiplier(unit)
    return base


_QUANTITY = re.compile(r"^\s*(?P<number>[+-]?[0-9]+(?:\.[0-9]*)?)\s*(?P<unit>[A-Za-z]*)\s*$")


def parse_quantity(descriptor: ResourceDescriptor, text: str) -> int:
    """Parse ``"512GiB"``, ``"8"`` or ``"500 mCPU"`` into base units of ``descriptor``.

    A decimal point is accepted only when the value is still a whole number of base units
    (``"1.5CPU"`` is 1500 mCPU); anything finer is an InputError, never rounded.
    """
    match = _QUANTITY.match(text)
    if match is None:
        raise InputError(
            f"Cannot parse quantity '{text}' for resource '{descriptor.name}'; "
            f"expected a number followed by one of: {', '.join(descriptor.unit_names)}."
        )
    number, unit = match.group("number"), match.group("unit") or None
    multiplier = descriptor.multiplier(unit)
    if number.startswith("-"):
        raise InputError(
            f"Quantity of resource '{descriptor.name}' must not be negative, got '{text}'."
        )
    whole, _, fraction = number.lstrip("+").partition(".")
    fraction = fraction.rstrip("0")
    scale: int = 10 ** len(fraction)
    numerator = (int(whole) * scale + (int(fraction) if fraction else 0)) * multiplier
    if numerator % scale:
        raise InputError(
            f"Quantity '{text}' of resource '{descriptor.name}' is not a whole number of "
            f"{descriptor.base_unit.name}."
        )
    return numerator // scale


def format_base(descriptor: ResourceDescriptor, base_quantity: int | None) -> str:
    """Render base units with the largest unit that divides them exactly (``8 GiB``)."""
    if base_quantity is None:
        return f"unlimited {descriptor.name}"
    for unit in sorted(descriptor.units, key=lambda u: (-u.multiplier, u.name)):
        if base_quantity and base_quantity % unit.multiplier == 0:
            return f"{base_quantity // unit.multiplier} {unit.name}"
    return f"{base_quantity} {descriptor.base_unit.name}"


HUMAN_DIGITS = 4
"""An exact rendering with at most this many digits is short enough to read at a glance."""


def format_human(descriptor: ResourceDescriptor, base_quantity: int | None) -> str:
    """Render base units for a person: exact where that stays short (``1.5 CPU``, ``8 GiB``,
    ``512 GB``), else rounded to one decimal in the largest unit (``23.5 GiB``, never
    ``24683664 KiB``). For tables and messages only: stored and JSON quantities stay exact."""
    exact = format_base(descriptor, base_quantity)
    if base_quantity is None or base_quantity == 0:
        return exact
    units = sorted(descriptor.units, key=lambda u: (-u.multiplier, u.name))
    unit = next((u for u in units if base_quantity >= u.multiplier), units[-1])
    # Integer arithmetic throughout: a float loses digits past 2**53 (a pool of 10**26 GPUs
    # showed as 100000000000000004764729344 GPU).
    if (base_quantity * 100) % unit.multiplier == 0:  # whole, or exact with two decimals
        whole, cents = divmod(base_quantity * 100 // unit.multiplier, 100)
        value = f"{whole}.{cents:02d}".rstrip("0").rstrip(".")
        return f"{value} {unit.name}"
    if len(exact.split(" ", 1)[0]) <= HUMAN_DIGITS:
        return exact
    whole, tenth = divmod((base_quantity * 20 + unit.multiplier) // (2 * unit.multiplier), 10)
    return f"{whole}.{tenth} {unit.name}"


@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact amount of one resource, held in base units.

    ``Quantity.of(MEMORY, 2, "GiB")``, ``Quantity.parse(CPU, "1.5CPU")``; ``q.in_unit("MiB")``
    converts back only when the result is whole, ``str(q)`` renders the largest exact unit.
    """

    descriptor: ResourceDescriptor
    base: int

    @classmethod
    def of(cls, descriptor: ResourceDescriptor, value: Any, unit: str | None = None) -> Quantity:
        return cls(descriptor, to_base(descriptor, value, unit))

    @classmethod
    def parse(cls, descriptor: ResourceDescriptor, text: str) -> Quantity:
        return cls(descriptor, parse_quantity(descriptor, text))

    def in_unit(self, unit: str) -> int:
        multiplier = self.descriptor.multiplier(unit)
        if self.base % multiplier:
            raise InputError(
                f"{format_base(self.descriptor, self.base)} is not a whole number of {unit}."
            )
        return self.base // multiplier

    def __str__(self) -> str:
        return format_base(self.descriptor, self.base)


def descriptor_of(kind: ResourceKind) -> ResourceDescriptor:
    """The descriptor of a resource kind of the registry (a stock one, or a custom one)."""
    return ResourceDescriptor(
        name=kind.resource,
        kind=kind.name,
        units=tuple(Unit(name=name, multiplier=multiplier) for name, multiplier in kind.units),
        default_unit=kind.default_unit,
        description=kind.description,
    )


UNIT_NAME_PATTERN = r"^[A-Za-z]{1,64}$"
"""What a custom unit's name may be: letters, as a quantity names it (``3chip``, ``2 GiB``)."""


def check_unit_names(descriptor: ResourceDescriptor) -> None:
    """Refuse a unit no quantity can name (``core-hour``, ``my unit``, ``x2``): a capacity or
    demand such as ``3chip`` reads its unit as the letters after the number. The unit named
    like its resource (a custom resource's one unit by default, ``tpu-v4``) is the exception: a
    bare number means it."""
    for unit in descriptor.units:
        if unit.name == descriptor.name:
            continue
        if re.fullmatch(UNIT_NAME_PATTERN, unit.name) is None:
            raise InputError(
                f"Unit '{unit.name}' of resource '{descriptor.name}' is not letters only "
                "(A-Z, a-z): a quantity such as '3chip' names its unit by the letters after "
                "the number."
            )


def check_custom_name(name: str, kind: str | None = None) -> None:
    """Refuse a custom resource named like a first-class kind (``cpu``, ``Memory``, ``gpu``):
    demands of the kind (a step's ``cpu_count=``) never use it, so it would sit beside the
    stock resource unused; and one of a first-class ``kind``: a demand of the kind (one CPU)
    would be met with it, in units that are not the kind's. Every descriptor creation goes
    through here."""
    for given, what in ((name, f"Resource '{name}'"), (kind, f"Kind '{kind}' of '{name}'")):
        builtin = None if given is None else kinds.builtin_named_like(given)
        if builtin is not None:
            raise InputError(
                f"{what} clashes with the built-in {builtin.name} kind: use its stock "
                f"resource '{builtin.resource}' instead of creating a custom one."
            )


STOCK_DESCRIPTORS: tuple[ResourceDescriptor, ...] = tuple(
    descriptor_of(kind) for kind in FIRST_CLASS_KINDS
)
"""Descriptors that exist from the start in every Resource Manager: one per first-class kind."""
CPU = descriptor_of(kinds.CPU)
MEMORY = descriptor_of(kinds.MEMORY)
GPU = descriptor_of(kinds.GPU)


def descriptors_by_name(
    descriptors: tuple[ResourceDescriptor, ...] | list[ResourceDescriptor],
) -> Mapping[str, ResourceDescriptor]:
    """Index by name; InputError on duplicates so a catalogue can never be ambiguous."""
    index: dict[str, ResourceDescriptor] = {}
    for descriptor in descriptors:
        if descriptor.name in index:
            raise InputError(f"Resource descriptor '{descriptor.name}' is defined twice.")
        index[descriptor.name] = descriptor
    return index
