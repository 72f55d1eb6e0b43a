"""``Workspace``: the active stack and its components, read once per workspace, store and name,
and still right when the configuration or the store changes within the process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType
from wharf.core.errors import EntityNotFoundError
from wharf.sdk import stacks
from wharf.sdk.workspace import DEFAULT_STACK, Workspace
from wharf.store.sql import SqlStore

ORCH = ComponentType.ORCHESTRATOR
STORE = ComponentType.ARTIFACT_STORE


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def workspace(sqlite_store: SqlStore, home: Path) -> Workspace:
    return Workspace.open(load_config({}, home=home), sqlite_store)


class Reads:
    """Counts the stack reads of a store's stack repository."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: SqlStore) -> None:
        self.calls: list[str] = []
        repo = store.stacks
        for name in ("get_stack_by_name", "get_component"):
            original = getattr(repo, name)

            def spy(*args: Any, _name: str = name, _original: Any = original) -> Any:
                self.calls.append(_name)
                return _original(*args)

            monkeypatch.setattr(repo, name, spy)


def register(workspace: Workspace, name: str, path: Path) -> None:
    stacks.register_component(workspace, name, ORCH, "local_process")
    stacks.register_component(workspace, name, STORE, "local", {"path": str(path)})
    stacks.register_stack(workspace, name, orchestrator=name, artifact_store=name)


def test_the_active_stack_and_its_components_are_read_once(
    workspace: Workspace, sqlite_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = workspace.active_stack()
    reads = Reads(monkeypatch, sqlite_store)
    for _ in range(3):
        assert workspace.active_stack() == first
        workspace.component_instance(first, ORCH)
        workspace.component_instance(first, STORE)
    assert reads.calls == ["get_component", "get_component"]  # each component once


def test_component_instances_are_not_shared(workspace: Workspace) -> None:
    stack = workspace.active_stack()
    one, two = (workspace.component_instance(stack, STORE) for _ in range(2))
    assert one is not two and one.path == two.path and one.id == two.id


def test_a_change_of_active_stack_is_seen_at_once(
    workspace: Workspace, home: Path, tmp_path: Path
) -> None:
    default = workspace.active_stack()
    register(workspace, "prod", tmp_path / "prod")
    workspace.config = load_config({"WHARF_ACTIVE_STACK": "prod"}, home=home)
    prod = workspace.active_stack()
    assert prod.name == "prod" and prod.id != default.id
    assert workspace.component_instance(prod, STORE).path == str(tmp_path / "prod")
    assert workspace.component_instance(prod, ORCH).flavor == "local_process"
    workspace.config = load_config({}, home=home)
    assert workspace.active_stack() == default


def test_a_stack_registered_after_a_miss_is_found(
    workspace: Workspace, home: Path, tmp_path: Path
) -> None:
    workspace.config = load_config({"WHARF_ACTIVE_STACK": "later"}, home=home)
    with pytest.raises(EntityNotFoundError):
        workspace.active_stack()
    register(workspace, "later", tmp_path / "later")
    assert workspace.active_stack().name == "later"


def test_another_store_starts_afresh(
    workspace: Workspace, sqlite_store_factory: Any, tmp_path: Path
) -> None:
    first = workspace.active_stack()
    other = sqlite_store_factory()
    workspace.store = other
    second = workspace.active_stack()
    assert second.name == DEFAULT_STACK and second.id != first.id
    assert other.stacks.get_stack(second.id) == second
    assert workspace.component_instance(second, STORE).id == second.components[STORE]


def test_an_artifact_root_the_default_stack_does_not_use_is_not_silently_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The default stack keeps the artifact root it was made with: WHARF_ARTIFACT_ROOT set
    # later (say, to a bigger disk) changed nothing, and nothing said so.
    from wharf import pipeline, step

    @step(enable_cache=False)
    def produce() -> int:
        return 1

    @pipeline(name="moved_root")
    def moved_root() -> None:
        produce()

    home = tmp_path / "home"
    for var in ("WHARF_STORE_URL", "WHARF_ACTIVE_STACK", "WHARF_ARTIFACT_ROOT"):
        monkeypatch.delenv(var, raising=False)
    first = Workspace.open(load_config({}, home=home))
    try:
        with caplog.at_level("WARNING", logger="wharf"):
            moved_root.run_in(first)
        assert not [r for r in caplog.records if "artifact root" in r.getMessage()]
    finally:
        first.close()

    bigger = tmp_path / "bigger"
    again = Workspace.open(load_config({"WHARF_ARTIFACT_ROOT": str(bigger)}, home=home))
    try:
        caplog.clear()
        with caplog.at_level("WARNING", logger="wharf"):
            moved_root.run_in(again)
    finally:
        again.close()
    messages = [r.getMessage() for r in caplog.records if "artifact root" in r.getMessage()]
    assert messages == [
        f"The artifact root {bigger} (WHARF_ARTIFACT_ROOT) is not used: the default stack keeps "
        f"its artifacts where it was made, {home / 'artifacts'}. To keep them at {bigger}, "
        "register an artifact store there (wharf component register NAME --type "
        f"artifact_store --flavor local -c path={bigger}) and a stack that uses it."
    ]
