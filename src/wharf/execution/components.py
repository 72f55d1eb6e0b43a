"""Building stack component objects from their records: the flavor's class (a ``wharf.flavors``
entry point, imported here and only here) called with the record's configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wharf.config.flavors import flavor_class
from wharf.core.enums import ComponentType
from wharf.core.errors import InputError
from wharf.store.models import ComponentRecord


def instantiate_component(record: ComponentRecord) -> Any:
    cls = flavor_class(record.type, record.flavor)
    if record.type is ComponentType.ARTIFACT_STORE:
        from_configuration = getattr(cls, "from_configuration", None)
        if from_configuration is not None:  # a store configured by more than its path
            return from_configuration(record.configuration, id=record.id)
        path = record.configuration.get("path")
        if not isinstance(path, str) or not path:
            raise InputError(f"Artifact store '{record.name}' has no 'path' configured.")
        return cls(Path(path), id=record.id)
    return cls(record)
