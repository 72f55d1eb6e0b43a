"""Which class implements each component flavor: the ``wharf.flavors`` entry points, one per
``<component type>.<flavor>`` name (``orchestrator.local =
"wharf.orchestrators.local:LocalOrchestrator"``; Wharf declares its own in ``pyproject.toml``).
Also :data:`RESOURCE_MANAGERS`, how to reach a Resource Manager by mode.

Invariant: reading the flavors imports none of them (nor ``importlib.metadata`` until the first
read); a class is imported only by :func:`flavor_class`, so a stack's integration (Kubernetes)
is imported only where the stack runs. It lives in ``config`` so every layer can use it.
"""

from __future__ import annotations

import importlib
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from wharf.core.enums import ComponentType
from wharf.core.errors import InputError, WharfError
from wharf.core.url_credentials import mask_credentials

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

FLAVOR_GROUP = "wharf.flavors"
"""The entry-point group that declares flavors."""

NOT_INSTALLED = (
    f" No '{FLAVOR_GROUP}' entry points are installed: install Wharf (pip install -e .) rather"
    " than running it from a source directory."
)


def declared_flavors() -> dict[ComponentType, dict[str, EntryPoint]]:
    """Every declared flavor, by component type then flavor name (nothing is imported).

    A name that is not ``<known component type>.<flavor>`` is ignored; when two distributions
    declare the same name, the first on ``sys.path`` wins (as for imports). The scan is cached
    per ``sys.path``: a path entry added later is seen, a distribution installed into an
    existing entry while the process runs is not.
    """
    return {type: dict(points) for type, points in _scan(tuple(sys.path)).items()}


@lru_cache(maxsize=4)
def _scan(search_path: tuple[str, ...]) -> dict[ComponentType, dict[str, EntryPoint]]:
    from importlib.metadata import entry_points

    del search_path  # the cache key only: entry_points() reads sys.path itself
    types = {type.value: type for type in ComponentType}
    found: dict[ComponentType, dict[str, EntryPoint]] = {type: {} for type in ComponentType}
    for point in entry_points(group=FLAVOR_GROUP):
        type_name, dot, flavor = point.name.partition(".")
        if dot and flavor and type_name in types:
            found[types[type_name]].setdefault(flavor, point)
    return found


def known_flavors(type: ComponentType) -> list[str]:
    """The flavors declared for ``type``, sorted."""
    return sorted(declared_flavors()[type])


def check_flavor(type: ComponentType, flavor: str) -> EntryPoint:
    """The entry point of ``flavor``; an unknown one is an error naming the known ones."""
    declared = declared_flavors()
    point = declared[type].get(flavor)
    if point is None:
        known = ", ".join(sorted(declared[type])) or "none"
        hint = "" if any(declared.values()) else NOT_INSTALLED
        raise InputError(f"Unknown {type.value} flavor '{flavor}'; known: {known}.{hint}")
    return point


def flavor_class(type: ComponentType, flavor: str) -> Any:
    """The class that implements ``flavor`` of ``type``, imported now."""
    point = check_flavor(type, flavor)
    try:
        return point.load()
    except (ImportError, AttributeError) as error:
        raise WharfError(
            f"The {type.value} flavor '{flavor}' ({point.value}) cannot be loaded: {error}"
        ) from None


RESOURCE_MANAGERS: dict[str, str] = {
    "embedded": "wharf.resource_manager.embedded.connect:connect_embedded",
}
"""How to reach a Resource Manager, by mode; ``none`` disables resource requests."""


def resource_manager_connector(mode: str, *, load: bool = True) -> Any:
    """The function that connects to the Resource Manager in ``mode`` (with ``load=False``
    only checks that the mode exists, importing nothing)."""
    try:
        path = RESOURCE_MANAGERS[mode]
    except KeyError:
        known = ", ".join([*sorted(RESOURCE_MANAGERS), "none"])
        shown = mask_credentials(mode)  # a URL given here by mistake may hold a password
        raise InputError(f"Unknown Resource Manager mode '{shown}'; known: {known}.") from None
    if not load:
        return None
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)
