"""The workspace server's ``default`` stack, made by the server from its own settings at start-up
(:func:`ensure_default_stack`).

Invariants: nothing in it comes from one member's machine (clients of a server never make the
stack with a path of theirs); making it is idempotent and race-safe (replicas may start
together), and a ``default`` stack that exists already is kept as it is (a warning says when its
artifact store is not the one the settings name).
"""

from __future__ import annotations

import logging

from wharf.core.enums import ComponentType
from wharf.core.errors import EntityExistsError, EntityNotFoundError
from wharf.store.models import ComponentCreate, ComponentRecord, StackRecord
from wharf.store.ports import Store

logger = logging.getLogger(__name__)

DEFAULT = "default"
LOCAL = "local"


def ensure_default_stack(store: Store, artifact_root: str | None) -> StackRecord:
    """The ``default`` stack, made from the server's settings if missing: the ``local``
    orchestrator and, given ``artifact_root`` (``--artifact-root``: a directory every client and
    step process reaches under that path, e.g. a shared file system), a ``local`` artifact store
    there. Without it the stack has no artifact store, and running a pipeline on it fails saying
    how to register one (``wharf.sdk.workspace``)."""
    try:
        stack = store.stacks.get_stack_by_name(DEFAULT)
    except EntityNotFoundError:
        pass
    else:
        _check_existing(store, stack, artifact_root)
        return stack
    components = {ComponentType.ORCHESTRATOR: _component(store, ComponentType.ORCHESTRATOR, {})}
    if artifact_root is not None:
        artifacts = _component(store, ComponentType.ARTIFACT_STORE, {"path": artifact_root})
        if artifacts.configuration.get("path") == artifact_root:
            components[ComponentType.ARTIFACT_STORE] = artifacts
        else:  # made by a client of an earlier version: never adopted
            logger.warning(
                "--artifact-root %s is not used: an artifact store named '%s' exists with "
                "another path; the '%s' stack is made without an artifact store.",
                artifact_root,
                DEFAULT,
                DEFAULT,
            )
    try:
        return store.stacks.create_stack(DEFAULT, {t: c.id for t, c in components.items()})
    except EntityExistsError:
        return store.stacks.get_stack_by_name(DEFAULT)


def _component(store: Store, type: ComponentType, configuration: dict[str, str]) -> ComponentRecord:
    create = ComponentCreate(name=DEFAULT, type=type, flavor=LOCAL, configuration=configuration)
    try:
        return store.stacks.create_component(create)
    except EntityExistsError:
        return store.stacks.get_component_by_name(type, DEFAULT)


def _check_existing(store: Store, stack: StackRecord, artifact_root: str | None) -> None:
    component_id = stack.components.get(ComponentType.ARTIFACT_STORE)
    path = None
    if component_id is not None:
        component = store.stacks.get_component(component_id)
        path = component.configuration.get("path", component.flavor)
    if path == artifact_root:
        return
    if artifact_root is None:
        logger.warning(
            "The '%s' stack keeps its artifact store at %s, made before the server set it; "
            "start the server with --artifact-root %s to say it is meant, or have members use "
            "another stack.",
            DEFAULT,
            path,
            path,
        )
    else:
        logger.warning(
            "--artifact-root %s is not used: the '%s' stack exists already with artifact "
            "store %s; register a stack on an artifact store at %s instead.",
            artifact_root,
            DEFAULT,
            path or "(none)",
            artifact_root,
        )
