"""The resource-kind registry: the first-class kinds (:data:`CPU`, :data:`MEMORY`, :data:`GPU`,
in :data:`FIRST_CLASS_KINDS`) and custom kinds (:func:`custom_kind`), with :func:`kind_named`
and :func:`is_basic`.

Invariants: kind names are unique; each kind has exactly one base unit and its default unit is
one of its units. Everything that special-cases cpu, memory or gpu (settings shortcuts, the RM's
stock descriptors, the local pool, runtime selection, pinning) reads it from here, so adding a
first-class kind means adding it to :data:`FIRST_CLASS_KINDS` (and, for an existing Resource
Manager database, a migration seeding its stock descriptor).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from wharf.core.resources import ByteUnit


@dataclass(frozen=True, slots=True)
class ResourceKind:
    """One kind of resource and the stock resource that stands for it: its units, the unit a
    bare number means, and whether it is *basic infrastructure* (a step asking for a basic kind
    runs isolated in its own process, since only a process can be pinned to what it was given;
    custom kinds such as licences alone stay inline)."""

    name: str
    """The kind as demands and descriptors spell it (``cpu``)."""
    resource: str
    """The stock resource (descriptor) of this kind (``CPU``)."""
    units: tuple[tuple[str, int], ...]
    """(unit name, multiplier to the base unit)."""
    default_unit: str
    """The unit a bare number means."""
    basic: bool
    """Basic infrastructure: a step demanding it runs isolated."""
    description: str = ""

    def __post_init__(self) -> None:
        names = [name for name, _ in self.units]
        if len(set(names)) != len(names) or [m for _, m in self.units].count(1) != 1:
            raise ValueError(f"Kind '{self.name}' needs unique unit names and one base unit.")
        if self.default_unit not in names:
            raise ValueError(f"Kind '{self.name}': default unit '{self.default_unit}' unknown.")

    @property
    def base_unit(self) -> str:
        return next(name for name, multiplier in self.units if multiplier == 1)

    def multiplier(self, unit: str) -> int:
        """Base units in one ``unit``; KeyError if the kind has no such unit."""
        return dict(self.units)[unit]


CPU = ResourceKind(
    name="cpu",
    resource="CPU",
    units=(("mCPU", 1), ("CPU", 1000)),
    default_unit="CPU",
    basic=True,
    description="Processor time; the base unit is one thousandth of a CPU.",
)
MEMORY = ResourceKind(
    name="memory",
    resource="memory",
    units=tuple((unit.value, unit.byte_value) for unit in ByteUnit),
    default_unit="B",
    basic=True,
    description="Memory in bytes; decimal (KB, MB, ...) and binary (KiB, MiB, ...) units.",
)
GPU = ResourceKind(
    name="gpu",
    resource="GPU",
    units=(("GPU", 1),),
    default_unit="GPU",
    basic=True,
    description="Whole GPUs; the capacity class says which model.",
)

FIRST_CLASS_KINDS: tuple[ResourceKind, ...] = (CPU, MEMORY, GPU)
"""Kinds every Resource Manager knows from the start (its stock descriptors), in that order."""

_BY_NAME: Mapping[str, ResourceKind] = MappingProxyType({k.name: k for k in FIRST_CLASS_KINDS})
STOCK_RESOURCES: frozenset[str] = frozenset(kind.resource for kind in FIRST_CLASS_KINDS)
"""Names of the stock resources (``CPU``, ``memory``, ``GPU``)."""


def kind_named(name: str | None) -> ResourceKind | None:
    """The first-class kind called ``name``; None for a custom kind (or no kind)."""
    return None if name is None else _BY_NAME.get(name)


def builtin_named_like(name: str) -> ResourceKind | None:
    """The first-class kind whose name or stock resource is ``name`` case-insensitively
    (``cpu``, ``Cpu`` and ``CPU`` are all the CPU kind); None for any other name."""
    folded = name.casefold()
    return next(
        (k for k in FIRST_CLASS_KINDS if folded in (k.name.casefold(), k.resource.casefold())),
        None,
    )


def is_basic(kind: str | None) -> bool:
    """True when a demand of ``kind`` is basic infrastructure (it isolates a step)."""
    found = kind_named(kind)
    return found is not None and found.basic


def custom_kind(resource: str) -> ResourceKind:
    """The kind of a custom resource named ``resource`` (``license``): one unit named like the
    resource, never basic."""
    return ResourceKind(
        name=resource.lower(),
        resource=resource,
        units=((resource, 1),),
        default_unit=resource,
        basic=False,
    )
