"""Resource names and quantities typed by a person, read as the Resource Manager reads them
(:class:`Resources`), for ``wharf pool`` and ``wharf policy``.

Invariant: the built-in kinds (``CPU``, ``memory``, ``GPU``) are resolved and parsed here, never
by asking the RM (its stock descriptors are read-only and no custom resource may be named like
them), so :func:`check_before_asking` and :func:`check_quantities` refuse bad input of them
before any network call; every other name is the RM's registry's to answer, so an unknown
resource is still its answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wharf.resource_manager.domain import ResourceDescriptor

UNLIMITED = ("unlimited", "inf", "none")


class RegistryNeededError(Exception):
    """A name the built-in kinds do not settle: only the RM's registry can (see
    :func:`check_before_asking`)."""


def _stock(name: str) -> ResourceDescriptor | None:
    """The stock descriptor ``name`` resolves to, as the RM's registry resolves it (exactly,
    else case-insensitively): no custom descriptor may be named like a built-in kind
    (``units.check_custom_name``), and stock descriptors are read-only, so the answer is the
    RM's without asking it."""
    from wharf.resource_manager.domain.units import STOCK_DESCRIPTORS

    exact = [d for d in STOCK_DESCRIPTORS if d.name == name]
    folded = exact or [d for d in STOCK_DESCRIPTORS if d.name.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


class Resources:
    """The RM's descriptors, for resolving names and quantities typed by a person.

    Quantities are read exactly as the RM reads them (``64`` is 64 of the resource's default
    unit: 64 CPU; ``512GiB``; ``500mCPU``), so unknown units, negative or fractional quantities
    fail here, before anything is sent. Resource names match descriptors exactly or, failing
    that, case-insensitively (``gpu`` is ``GPU``).

    The built-in kinds (``CPU``, ``memory``, ``GPU``) are resolved here; ``registry`` (the RM's
    descriptors) is called, once, only for another name, or for a ``RESOURCE:CLASS`` key (a
    descriptor named the whole key wins, as the RM has it). Without a registry
    (:meth:`local`), such names raise :class:`RegistryNeededError`, except that a
    ``RESOURCE:CLASS`` key of a built-in resource is read as one.
    """

    def __init__(self, registry: Callable[[], Sequence[ResourceDescriptor]] | None) -> None:
        self._registry = registry
        self._loaded: dict[str, ResourceDescriptor] | None = None

    @classmethod
    def local(cls) -> Resources:
        return cls(None)

    def _by_name(self) -> dict[str, ResourceDescriptor]:
        if self._loaded is None:
            if self._registry is None:
                raise RegistryNeededError
            self._loaded = {d.name: d for d in self._registry()}
        return self._loaded

    def descriptor(self, name: str) -> ResourceDescriptor:
        from wharf.core.errors import InputError

        stock = _stock(name)
        if stock is not None:
            return stock
        by_name = self._by_name()
        found = by_name.get(name)
        if found is not None:
            return found
        folded = [d for d in by_name.values() if d.name.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0]
        known = ", ".join(sorted(by_name))
        import re

        from wharf.core.resources import NAME_PATTERN

        hint = " `wharf resource create NAME` registers a custom one."
        if re.fullmatch(NAME_PATTERN, name):
            hint = f" `wharf resource create {name}` registers it."
        raise InputError(f"Unknown resource '{name}'; known resources: {known}.{hint}")

    def split_key(self, key: str) -> tuple[str, str | None]:
        """``RESOURCE[:CLASS]`` -> (descriptor name, class or None)."""
        from wharf.core.errors import InputError

        if ":" in key:
            resource, _, class_name = key.partition(":")
            if self._registry is None and _stock(resource) is None:
                raise RegistryNeededError
            if self._registry is None or key not in self._by_name():
                if not class_name.strip():
                    raise InputError(
                        f"No class after ':' in '{key}'; write RESOURCE or RESOURCE:CLASS."
                    )
                return self.descriptor(resource).name, class_name.strip()
        return self.descriptor(key).name, None

    def quantity(self, resource: str, text: str, *, allow_unlimited: bool = False) -> int | None:
        """Base units of ``text`` for ``resource`` (None for ``unlimited`` where allowed)."""
        from wharf.core.errors import InputError
        from wharf.resource_manager.domain.units import parse_quantity

        if text.lower() in UNLIMITED:
            if allow_unlimited:
                return None
            raise InputError(f"A quantity of '{resource}' is needed here, not '{text}'.")
        return parse_quantity(self.descriptor(resource), text)

    def show(self, resource: str, base: int | None) -> str:
        from wharf.resource_manager.domain.units import format_human

        stock = _stock(resource)
        if stock is not None and stock.name == resource:
            descriptor: ResourceDescriptor | None = stock
        else:
            descriptor = self._by_name().get(resource)
        return str(base) if descriptor is None else format_human(descriptor, base)


def check_before_asking(texts: Iterable[str], read: Callable[[Resources, str], object]) -> None:
    """Refuse bad input of the built-in kinds before the RM is reached: ``read`` each of
    ``texts`` as the command will, with the built-in kinds only, raising its errors with the
    same words; an entry naming another resource is left for the RM's registry (an unknown
    one is its answer)."""
    local = Resources.local()
    for text in texts:
        try:
            read(local, text)
        except RegistryNeededError:
            continue


def check_quantities(quantities: Iterable[tuple[str, object]]) -> None:
    """(resource, value) pairs of a validated pool or policy body, refused here with the RM's
    words if it would refuse them: a string quantity (it carries a unit; the RM converts it)
    of a built-in kind. Other values and resources are the RM's to check."""
    from wharf.resource_manager.domain.units import parse_quantity

    for resource, value in quantities:
        stock = _stock(resource)
        if stock is not None and stock.name == resource and isinstance(value, str):
            parse_quantity(stock, value)
