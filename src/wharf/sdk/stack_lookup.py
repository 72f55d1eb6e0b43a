"""Finding a stack or a component by what a person types: its name, its id, or an id prefix
(as ``wharf stack list`` and ``wharf component list`` show ids).

Invariant: a whole id is looked up before names, and a name that is also the start of
another record's id is refused as ambiguous (InputError naming both), so no name takes over
another record's id.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from wharf.core.enums import ComponentType
from wharf.core.errors import EntityNotFoundError, InputError
from wharf.core.ids import only_match, parse_id_prefix, parse_uuid
from wharf.core.suggestions import did_you_mean
from wharf.sdk.workspace import Workspace
from wharf.store.models import MAX_PAGE_SIZE, ComponentRecord, Page, PageRequest, StackRecord
from wharf.store.ports import StackRepository

R = TypeVar("R", ComponentRecord, StackRecord)


def find_component(workspace: Workspace, type: ComponentType, name: str) -> ComponentRecord:
    """The component of that type and name; a clear error if it has another type or none."""
    stacks = workspace.store.stacks
    try:
        return stacks.get_component_by_name(type, name)
    except EntityNotFoundError:
        pass
    others = []
    for other in ComponentType:
        if other is type:
            continue
        try:
            stacks.get_component_by_name(other, name)
        except EntityNotFoundError:
            continue
        others.append(other.value)
    if others:
        raise InputError(f"Component '{name}' is of type {' and '.join(others)}, not {type.value}.")
    hint = did_you_mean(name, _component_names(stacks, type)) or "."
    raise EntityNotFoundError(f"No {type.value} component named '{name}'{hint}")


def find_any_component(workspace: Workspace, text: str) -> ComponentRecord:
    """The component ``text`` names without a type: the one whose id is ``text``, else the one
    component of that name, else the one whose id starts with it (as ``wharf component list``
    shows ids). A name that several types use asks for the type, and one that is also the
    start of another component's id for the whole id (InputError)."""
    stacks = workspace.store.stacks
    uid = parse_uuid(text)
    if uid is not None:
        with contextlib.suppress(EntityNotFoundError):
            return stacks.get_component(uid)
    named = []
    for type in ComponentType:
        try:
            named.append(stacks.get_component_by_name(type, text))
        except EntityNotFoundError:
            continue
    if len(named) > 1:
        types = " and ".join(c.type.value for c in named)
        raise InputError(f"Components named '{text}' are of types {types}: give --type.")
    prefix = None if uid is not None else parse_id_prefix(text)
    matches = (
        [] if prefix is None else _by_id_prefix(lambda p: stacks.list_components(page=p), prefix)
    )
    if named:
        _refuse_two_meanings("component", text, named[0], matches)
        return named[0]
    found = only_match("component", text, matches)
    if found is None:
        hint = did_you_mean(text, _component_names(stacks)) or "."
        raise EntityNotFoundError(f"No component named '{text}'{hint}")
    return found


def _component_names(stacks: StackRepository, type: ComponentType | None = None) -> list[str]:
    """The names of the first page of components (of ``type``): the ones a hint looks among."""
    return [c.name for c in stacks.list_components(type, PageRequest(size=MAX_PAGE_SIZE)).items]


def find_stack(workspace: Workspace, text: str) -> StackRecord:
    """The stack whose id is ``text``, else the one named ``text``, else the one whose id
    starts with it (at least :data:`~wharf.core.ids.MIN_ID_PREFIX` hex digits), as ``wharf
    stack list`` shows ids; a prefix of several ids raises ``AmbiguousIdError``, none the
    not-found error of the name. A name that is also the start of another stack's id is
    refused (InputError), so no stack's name takes over another's id."""
    stacks = workspace.store.stacks
    uid = parse_uuid(text)
    if uid is not None:
        with contextlib.suppress(EntityNotFoundError):
            return stacks.get_stack(uid)
    prefix = None if uid is not None else parse_id_prefix(text)
    try:
        named = stacks.get_stack_by_name(text)
    except EntityNotFoundError:
        matches = [] if prefix is None else _by_id_prefix(stacks.list_stacks, prefix)
        found = only_match("stack", text, matches)
        if found is None:
            raise
        return found
    if prefix is not None:
        _refuse_two_meanings("stack", text, named, _by_id_prefix(stacks.list_stacks, prefix))
    return named


def _refuse_two_meanings(
    kind: str, text: str, named: StackRecord | ComponentRecord, by_prefix: list[Any]
) -> None:
    others = [record for record in by_prefix if record.id != named.id]
    if others:
        raise InputError(
            f"'{text}' is the name of {kind} '{named.name}' ({named.id}) and the start of the "
            f"id of {kind} '{others[0].name}' ({others[0].id}): give the whole id of the one "
            "you mean."
        )


def _by_id_prefix(list_page: Callable[[PageRequest], Page[R]], prefix: str) -> list[R]:
    """Every record ``list_page`` pages through whose id starts with ``prefix``."""
    matches: list[R] = []
    index = 1
    while True:
        page = list_page(PageRequest(index=index, size=MAX_PAGE_SIZE))
        matches += [r for r in page.items if r.id.hex.startswith(prefix)]
        if index * MAX_PAGE_SIZE >= page.total or not page.items:
            return matches
        index += 1
