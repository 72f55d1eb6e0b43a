"""Settings for stack components given on steps and pipelines
(``@step(settings={"orchestrator.kubernetes": {...}})``, the same on ``@pipeline``).

Owns the keys' rules and parsing (:func:`parse_component_settings`), the layering (pipeline
settings apply to every step, a step's own are deep-merged over them: :func:`step_layered`),
and the check against the stack's components before a run is recorded
(:func:`check_component_settings`).

Invariants: keys are ``<component type>.<flavor>`` with a known component type; values are
stored as plain JSON, never as an integration's model (the engine imports no integration);
settings for a flavor that is not the stack's are kept and ignored, unless its name is a near
miss of an installed flavor's (a typo).
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel

from wharf.config.flavors import known_flavors
from wharf.core.enums import ComponentType
from wharf.core.errors import InputError

if TYPE_CHECKING:
    from wharf.config.spec import PipelineSpec

ComponentSettings = dict[str, dict[str, Any]]
"""``{"<component type>.<flavor>": {field: value, ...}}``: plain JSON."""

_FLAVOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def is_component_key(key: str) -> bool:
    """Whether a ``settings`` key names a component (``orchestrator.kubernetes``), as opposed
    to Wharf's own settings (``resources``)."""
    return "." in key


def settings_key(component_type: ComponentType | str, flavor: str) -> str:
    """The ``settings`` key of a component type and flavor."""
    return f"{ComponentType(component_type).value}.{flavor}"


def parse_component_settings(owner: str, settings: Mapping[str, Any] | None) -> ComponentSettings:
    """The component entries of a ``settings`` mapping (keys with a dot) as plain JSON.
    ``owner`` names where they were given (``step 'train'``) in errors. A pydantic model counts
    only with the fields its user set (``exclude_unset``, at every depth), so it overrides only
    what its user chose."""
    parsed: ComponentSettings = {}
    for key, value in (settings or {}).items():
        if not is_component_key(key):
            continue
        component_type, _, flavor = key.partition(".")
        if component_type not in set(ComponentType):
            known = ", ".join(f"'{t.value}.<flavor>'" for t in ComponentType)
            raise InputError(
                f"Unknown component type '{component_type}' in settings['{key}'] of {owner}; "
                f"component settings are keyed {known}."
            )
        if not _FLAVOR.fullmatch(flavor):
            raise InputError(
                f"settings['{key}'] of {owner} names no flavor: use "
                f"'{component_type}.<flavor>' (e.g. '{component_type}.kubernetes')."
            )
        _refuse_a_misspelt_flavor(owner, key, ComponentType(component_type), flavor)
        parsed[key] = _plain_mapping(owner, key, value)
    return parsed


def _refuse_a_misspelt_flavor(owner: str, key: str, type: ComponentType, flavor: str) -> None:
    """A flavor that is not installed but close to one that is (``kubernets``) is a typo that
    would silently drop the entry: refused, naming the installed one. Other unknown flavors are
    kept (a pipeline may carry settings for another stack's components)."""
    known = known_flavors(type)
    if flavor in known:
        return
    close = difflib.get_close_matches(flavor, known, n=1, cutoff=0.8)
    if close:
        raise InputError(
            f"settings['{key}'] of {owner} names no installed {type.value} flavor: "
            f"did you mean '{type.value}.{close[0]}'?"
        )


def layered(base: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    """``layer`` over ``base``: mappings merged key by key at every depth, anything else
    (lists, scalars) replaced whole. Neither input is mutated."""
    merged = copy.deepcopy(dict(base))
    for key, value in layer.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = layered(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def step_layered(
    pipeline_settings: Mapping[str, Mapping[str, Any]],
    step_settings: Mapping[str, Mapping[str, Any]],
) -> ComponentSettings:
    """A step's component settings: each of its entries :func:`layered` over the pipeline's
    entry of the same key; the pipeline's other entries as they are."""
    merged = {key: layered({}, value) for key, value in pipeline_settings.items()}
    for key, value in step_settings.items():
        merged[key] = layered(merged.get(key, {}), value)
    return merged


@runtime_checkable
class SettingsLayering(Protocol):
    """What a component's ``settings`` offers to validate a step's or pipeline's entry: its
    own settings with ``override`` layered over them, raising :class:`InputError` (naming the
    field) when the result is invalid."""

    def merged(self, override: Mapping[str, Any]) -> object: ...


def check_component_settings(spec: PipelineSpec, components: Iterable[object | None]) -> None:
    """Validate the entries of ``spec`` meant for the stack's ``components`` (instances built
    from their records, None skipped): one whose ``settings`` is a :class:`SettingsLayering`
    validates the pipeline's entry for its key and each step's (already merged over the
    pipeline's). Raises one :class:`InputError` for the first invalid entry, naming the step
    (or pipeline), the key and the component's own words about the field. Dynamic pipelines'
    steps are checked when they run."""
    for component in components:
        record = getattr(component, "component", None)
        own = getattr(component, "settings", None)
        if record is None or not isinstance(own, SettingsLayering):
            continue
        key = settings_key(record.type, record.flavor)
        layers = [(f"pipeline '{spec.name}'", spec.config.settings.get(key))]
        layers += [
            (f"step '{name}'", step.config.settings.get(key)) for name, step in spec.steps.items()
        ]
        for owner, layer in layers:
            if layer is None:
                continue
            try:
                own.merged(layer)
            except InputError as exc:
                raise InputError(f"Invalid settings['{key}'] of {owner}: {exc}") from None


def _plain_mapping(owner: str, key: str, value: Any) -> dict[str, Any]:
    plain = _plain(value)
    if not isinstance(plain, dict):
        raise InputError(
            f"settings['{key}'] of {owner} must be a mapping or a settings object, "
            f"not a {type(value).__name__}."
        )
    try:
        stored: dict[str, Any] = json.loads(json.dumps(plain))
    except (TypeError, ValueError) as exc:
        raise InputError(f"settings['{key}'] of {owner} must be JSON-serialisable: {exc}") from None
    return stored


def _plain(value: Any) -> Any:
    """Models as the fields their user set (recursively), mappings and lists element-wise."""
    if isinstance(value, BaseModel):
        return _plain(value.model_dump(mode="json", exclude_unset=True))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
