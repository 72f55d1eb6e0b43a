"""Which class implements each component flavor, as import strings (no global registry).

It lives in ``config`` so that every layer (the SDK, and a step's own process) can resolve a
stack's components; integrations (Kubernetes) are listed by import string so that nothing
imports them unless a stack uses them.
"""

from __future__ import annotations

import importlib
from typing import Any

from wharf.core.enums import ComponentType
from wharf.core.errors import InputError

FLAVORS: dict[ComponentType, dict[str, str]] = {
    ComponentType.ORCHESTRATOR: {
        "local": "wharf.orchestrators.local:LocalOrchestrator",
        "local_process": "wharf.orchestrators.local_process:LocalProcessOrchestrator",
    },
    ComponentType.ARTIFACT_STORE: {
        "local": "wharf.artifacts.store:LocalArtifactStore",
    },
    ComponentType.STEP_OPERATOR: {
        "local_process": "wharf.step_operators.local_process:LocalProcessStepOperator",
    },
}


def flavor_class(type: ComponentType, flavor: str) -> Any:
    try:
        path = FLAVORS[type][flavor]
    except KeyError:
        known = ", ".join(sorted(FLAVORS[type])) or "none"
        raise InputError(f"Unknown {type.value} flavor '{flavor}'; known: {known}.") from None
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


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
        raise InputError(f"Unknown Resource Manager mode '{mode}'; known: {known}.") from None
    if not load:
        return None
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)
