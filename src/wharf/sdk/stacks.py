"""Registering stack components and stacks, choosing the active stack, describing stacks.

The logic behind ``wharf component ...`` and ``wharf stack ...``, shared with the REST server.
Entry points: :func:`register_component`, :func:`update_component`, :func:`register_stack`,
:func:`set_active_stack`, :func:`describe_stack`, :func:`delete_stack`; the server's component
routes check configurations with :func:`checked_flavor_configuration`.

Invariant: every function validates all of its input before it writes anything, so bad input
raises a one-line :class:`~wharf.core.errors.WharfError` and leaves nothing half-written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from wharf.config.global_config import write_user_config
from wharf.core.enums import ComponentType
from wharf.core.errors import (
    EntityNotFoundError,
    IllegalOperationError,
    InputError,
    WharfError,
)
from wharf.sdk import flavors
from wharf.sdk.stack_lookup import find_component, find_stack
from wharf.sdk.workspace import DEFAULT_STACK, Workspace
from wharf.store.models import (
    ComponentCreate,
    ComponentRecord,
    Page,
    PageRequest,
    StackRecord,
)

LOCAL_FLAVOR = "local"
ACTIVE_STACK_ENV = "WHARF_ACTIVE_STACK"
FSSPEC_FLAVOR = "fsspec"


class StackDescription(BaseModel):
    """A stack with its components resolved, and whether it is the active stack."""

    model_config = ConfigDict(frozen=True)

    id: UUID
    name: str
    active: bool
    created: datetime
    components: dict[ComponentType, ComponentRecord]

    def component_name(self, type: ComponentType) -> str | None:
        component = self.components.get(type)
        return None if component is None else component.name

    @property
    def orchestrator(self) -> str | None:
        return self.component_name(ComponentType.ORCHESTRATOR)

    @property
    def artifact_store(self) -> str | None:
        return self.component_name(ComponentType.ARTIFACT_STORE)

    @property
    def step_operator(self) -> str | None:
        return self.component_name(ComponentType.STEP_OPERATOR)


# ----------------------------------------------------------------------------- parsing


def parse_component_type(value: str | ComponentType) -> ComponentType:
    """``orchestrator``, ``artifact_store`` or ``step_operator`` (``-`` may replace ``_``)."""
    if isinstance(value, ComponentType):
        return value
    normalized = value.strip().lower().replace("-", "_")
    try:
        return ComponentType(normalized)
    except ValueError:
        known = ", ".join(t.value for t in ComponentType)
        raise InputError(f"Unknown component type '{value}'; known: {known}.") from None


def _json_or_string(text: str) -> Any:
    def reject(constant: str) -> Any:  # NaN / Infinity are not JSON: keep them as text
        raise ValueError(constant)

    try:
        return json.loads(text, parse_constant=reject)
    except ValueError:
        return text


def parse_configuration(pairs: Iterable[str]) -> dict[str, Any]:
    """``key=value`` pairs as a dict; a value is parsed as JSON when it parses, else kept as text.

    ``n=3`` gives ``3``, ``debug=true`` gives ``True``, ``path=/data`` gives ``"/data"`` and
    ``tag="3"`` gives ``"3"``. A pair without ``=``, an empty key or a repeated key is an error.
    """
    configuration: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"Configuration must be given as key=value, got '{pair}'.")
        if key in configuration:
            raise InputError(f"Configuration key '{key}' is given more than once.")
        configuration[key] = _json_or_string(value)
    return configuration


def _local_artifact_path(workspace: Workspace, configuration: Mapping[str, Any]) -> str:
    raw = configuration.get("path")
    if raw is None:
        raw = str(workspace.config.artifact_root)
    if not isinstance(raw, str) or not raw.strip():
        raise InputError(
            f"The 'path' of a local artifact store must be a directory path, got {raw!r}; "
            """quote numbers as JSON strings (-c 'path="2024"')."""
        )
    path = os.path.abspath(Path(raw).expanduser())
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(f"The artifact store path {path} exists and is not a directory.")
    return path


# ----------------------------------------------------------------------------- components


def register_component(
    workspace: Workspace,
    name: str,
    type: ComponentType | str,
    flavor: str,
    configuration: Mapping[str, Any] | None = None,
) -> ComponentRecord:
    """Register a stack component; its name must be new among components of its type."""
    component_type = parse_component_type(type)
    config = checked_configuration(workspace, component_type, flavor, configuration or {})
    create = ComponentCreate(name=name, type=component_type, flavor=flavor, configuration=config)
    return workspace.store.stacks.create_component(create)


def checked_configuration(
    workspace: Workspace, type: ComponentType, flavor: str, configuration: Mapping[str, Any]
) -> dict[str, Any]:
    """The configuration to store for a component of that type and flavor; InputError for an
    unknown flavor or an invalid value.

    A flavor is valid iff a ``wharf.flavors`` entry point declares it for the type
    (:mod:`wharf.sdk.flavors`). A ``local`` artifact store's ``path`` defaults to the configured
    artifact root (the ``default`` stack's; sharing it is safe because every artifact URI ends in
    a random component) and is stored absolute (``~`` expanded, relative paths resolved against
    the current directory), so later runs do not depend on their working directory. An
    ``fsspec`` store needs a ``path`` URL; options that look like secrets are refused and
    ``<name>_env=VARIABLE`` stores a variable's name instead
    (:mod:`wharf.artifacts.fsspec_options`).
    """
    flavors.check_flavor(type, flavor)
    config = checked_flavor_configuration(type, flavor, configuration)
    if type is ComponentType.ARTIFACT_STORE and flavor == LOCAL_FLAVOR:
        config["path"] = _local_artifact_path(workspace, config)
    return config


def checked_flavor_configuration(
    type: ComponentType, flavor: str, configuration: Mapping[str, Any]
) -> dict[str, Any]:
    """The checks of a component's configuration that need no workspace, made wherever a
    component is registered or reconfigured (:func:`checked_configuration` for the CLI and SDK,
    the REST server's component routes): the flavor class's own check, and an ``fsspec``
    store's (a URL; no clear-text secrets). The configuration to store; InputError naming the
    first unknown key or invalid value."""
    config = dict(configuration)
    _check_with_flavor_class(type, flavor, config)
    if type is ComponentType.ARTIFACT_STORE and flavor == FSSPEC_FLAVOR:
        from wharf.artifacts.fsspec_options import check_configuration

        config = check_configuration(config)  # a URL; no clear-text secrets
    return config


def _check_with_flavor_class(type: ComponentType, flavor: str, config: Mapping[str, Any]) -> None:
    """The flavor class's own check of ``config`` (its ``check_configuration``, if it has one:
    the ``local`` flavors refuse unknown keys, the ``kubernetes`` and ``local_process``
    orchestrators and step operators unknown keys and values; ``fsspec`` options are
    open-ended).

    Nothing when the class cannot be imported here: a flavor whose integration is installed only
    where the stack runs is stored unchecked and checked when it is first used.
    """
    try:
        flavor_class = flavors.flavor_class(type, flavor)
    except WharfError:
        return
    check = getattr(flavor_class, "check_configuration", None)
    if callable(check):
        check(config)


def list_components(
    workspace: Workspace,
    type: ComponentType | str | None = None,
    *,
    page: int = 1,
    size: int = 50,
) -> Page[ComponentRecord]:
    """Components (of one type, if given), newest first."""
    component_type = None if type is None else parse_component_type(type)
    return workspace.store.stacks.list_components(
        component_type, PageRequest(index=page, size=size)
    )


def update_component(
    workspace: Workspace,
    name: str,
    type: ComponentType | str,
    set_options: Mapping[str, Any],
    remove: Iterable[str] = (),
) -> ComponentRecord:
    """Set ``set_options`` and drop the ``remove`` keys in the configuration of the component of
    that type and name (its name, type and flavor stay); removed keys must exist, the result is
    validated by :func:`checked_configuration` like a new component's, and the store refuses
    it while a run on a stack using the component is unfinished."""
    removed = list(dict.fromkeys(remove))
    if not set_options and not removed:
        raise InputError("Nothing to change: give options to set or keys to remove.")
    both = [key for key in removed if key in set_options]
    if both:
        raise InputError(f"Configuration key '{both[0]}' is both set and removed.")
    record = find_component(workspace, parse_component_type(type), name)
    config = dict(record.configuration)
    for key in removed:
        if key not in config:
            known = ", ".join(sorted(record.configuration)) or "none"
            raise InputError(
                f"Component '{record.name}' has no configuration key '{key}' to remove; "
                f"its keys: {known}."
            )
        del config[key]
    config.update(set_options)
    config = checked_configuration(workspace, record.type, record.flavor, config)
    return workspace.store.stacks.update_component(record.id, config)


def delete_component(workspace: Workspace, name: str, type: ComponentType | str) -> ComponentRecord:
    """Delete the component of that type and name (refused while a stack uses it)."""
    record = find_component(workspace, parse_component_type(type), name)
    workspace.store.stacks.delete_component(record.id)
    return record


# ----------------------------------------------------------------------------- stacks


def active_stack_name(workspace: Workspace) -> str:
    """The name of the stack the workspace runs pipelines on (it may not exist):
    ``WHARF_ACTIVE_STACK`` if set, else ``active_stack`` in the user config file, else
    ``default``."""
    return workspace.config.active_stack or DEFAULT_STACK


def ensure_default_stack(workspace: Workspace) -> StackRecord:
    """The ``default`` stack, created (idempotently, race-safely) if missing."""
    try:
        return workspace.store.stacks.get_stack_by_name(DEFAULT_STACK)
    except EntityNotFoundError:
        return workspace.create_default_stack()


def get_stack(workspace: Workspace, name: str) -> StackRecord:
    """The stack of that name (or id, or id prefix: :func:`find_stack`); ``default`` is created
    on first use like everywhere else."""
    if name == DEFAULT_STACK:
        return ensure_default_stack(workspace)
    return find_stack(workspace, name)


def register_stack(
    workspace: Workspace,
    name: str,
    *,
    orchestrator: str,
    artifact_store: str,
    step_operator: str | None = None,
) -> StackRecord:
    """Register a stack from components given by name, each of the type of its slot. The
    ``default`` components exist from the start, so they can be reused by name."""
    ensure_default_stack(workspace)
    wanted = {
        ComponentType.ORCHESTRATOR: orchestrator,
        ComponentType.ARTIFACT_STORE: artifact_store,
        ComponentType.STEP_OPERATOR: step_operator,
    }
    ids: dict[ComponentType, UUID] = {}
    for type, component_name in wanted.items():
        if component_name is None:
            continue
        ids[type] = find_component(workspace, type, component_name).id
    return workspace.store.stacks.create_stack(name, ids)


def _describe(
    workspace: Workspace, stack: StackRecord, cache: dict[UUID, ComponentRecord]
) -> StackDescription:
    components: dict[ComponentType, ComponentRecord] = {}
    for type in ComponentType:  # display order: orchestrator, artifact store, step operator
        component_id = stack.components.get(type)
        if component_id is None:
            continue
        if component_id not in cache:
            cache[component_id] = workspace.store.stacks.get_component(component_id)
        components[type] = cache[component_id]
    return StackDescription(
        id=stack.id,
        name=stack.name,
        active=stack.name == active_stack_name(workspace),
        created=stack.created,
        components=components,
    )


def describe_stack(workspace: Workspace, name: str | None = None) -> StackDescription:
    """One stack (the active one by default) with its components and their configuration."""
    return _describe(workspace, get_stack(workspace, name or active_stack_name(workspace)), {})


def list_stacks(workspace: Workspace, *, page: int = 1, size: int = 50) -> Page[StackDescription]:
    """Stacks, newest first, with their components; the ``default`` stack always exists."""
    ensure_default_stack(workspace)
    result = workspace.store.stacks.list_stacks(PageRequest(index=page, size=size))
    cache: dict[UUID, ComponentRecord] = {}
    return Page[StackDescription](
        items=[_describe(workspace, stack, cache) for stack in result.items],
        index=result.index,
        size=result.size,
        total=result.total,
    )


def set_active_stack(workspace: Workspace, name: str) -> StackRecord:
    """Make ``name`` the active stack in the user config file; unknown stacks are refused.

    ``WHARF_ACTIVE_STACK`` keeps overriding the file, and workspaces already open keep the stack
    they resolved.
    """
    stack = get_stack(workspace, name)
    write_user_config(workspace.config.home, {"active_stack": stack.name})
    return stack


def stack_to_delete(workspace: Workspace, name: str) -> StackRecord:
    """Stack ``name`` if it exists and is not the active stack (IllegalOperationError)."""
    stack = find_stack(workspace, name)
    if stack.name == active_stack_name(workspace):
        how = (
            f"set {ACTIVE_STACK_ENV} to another stack first"
            if os.environ.get(ACTIVE_STACK_ENV)
            else "switch to another first: wharf stack set NAME"
        )
        raise IllegalOperationError(f"Stack '{stack.name}' is the active stack; {how}.")
    return stack


def delete_stack(workspace: Workspace, name: str) -> StackRecord:
    """Delete stack ``name``, keeping its components; the active stack is refused (switch
    first), and the store refuses one with an unfinished run or a schedule. The ``default``
    stack, when not active, may be deleted; it is made again on its next use."""
    stack = stack_to_delete(workspace, name)
    workspace.store.stacks.delete_stack(stack.id)
    return stack
