"""Contract: stack components (unique per type and name) and stacks (validated links)."""

from __future__ import annotations

import uuid

import pytest

from wharf.core.enums import ComponentType
from wharf.core.errors import EntityExistsError, EntityNotFoundError, InputError
from wharf.store.models import ComponentCreate, ComponentRecord, PageRequest
from wharf.store.sql import SqlStore

ORCH = ComponentType.ORCHESTRATOR
STORE = ComponentType.ARTIFACT_STORE


def component(
    store: SqlStore, name: str, type: ComponentType = ORCH, **config: object
) -> ComponentRecord:
    return store.stacks.create_component(
        ComponentCreate(name=name, type=type, flavor="local", configuration=dict(config))
    )


def test_components(backend: SqlStore) -> None:
    orch = component(backend, "local", ORCH, parallelism=4, nested={"a": [1, 2]})
    assert orch.configuration == {"parallelism": 4, "nested": {"a": [1, 2]}}
    assert backend.stacks.get_component(orch.id) == orch
    assert backend.stacks.get_component_by_name(ORCH, "local") == orch
    same_name_other_type = component(backend, "local", STORE)
    assert same_name_other_type.type is STORE
    with pytest.raises(EntityExistsError, match="orchestrator component named 'local'"):
        component(backend, "local", ORCH)
    with pytest.raises(EntityNotFoundError, match="No step_operator component named 'local'"):
        backend.stacks.get_component_by_name(ComponentType.STEP_OPERATOR, "local")
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No stack component with id {missing}"):
        backend.stacks.get_component(missing)
    assert backend.stacks.list_components().total == 2
    only_stores = backend.stacks.list_components(type=STORE)
    assert [c.id for c in only_stores.items] == [same_name_other_type.id]
    assert backend.stacks.list_components(page=PageRequest(size=1, index=2)).items == [orch]


def test_stacks(backend: SqlStore) -> None:
    orch = component(backend, "local")
    store = component(backend, "disk", STORE)
    stack = backend.stacks.create_stack("default", {ORCH: orch.id, STORE: store.id})
    assert stack.components == {ORCH: orch.id, STORE: store.id}
    assert backend.stacks.get_stack(stack.id) == stack
    assert backend.stacks.get_stack_by_name("default") == stack
    empty = backend.stacks.create_stack("empty", {})
    assert empty.components == {}
    assert backend.stacks.list_stacks().items == [empty, stack]
    with pytest.raises(EntityExistsError, match="stack named 'default'"):
        backend.stacks.create_stack("default", {ORCH: orch.id})
    with pytest.raises(EntityNotFoundError, match="No stack named 'nope'"):
        backend.stacks.get_stack_by_name("nope")
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No stack with id {missing}"):
        backend.stacks.get_stack(missing)


def test_create_stack_validates_components(backend: SqlStore) -> None:
    orch = component(backend, "local")
    missing = uuid.uuid4()
    with pytest.raises(InputError, match=f"{missing} does not exist"):
        backend.stacks.create_stack("s", {ORCH: missing})
    with pytest.raises(InputError, match="is of type orchestrator, not artifact_store"):
        backend.stacks.create_stack("s", {STORE: orch.id})
    assert backend.stacks.list_stacks().total == 0  # nothing was stored
