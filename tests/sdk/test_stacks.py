"""``wharf.sdk.stacks``: components, stacks and the active stack, against a real SQLite store."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.config.flavor_dist import TINY_MODULE, tiny_distribution
from wharf.config.global_config import load_config, write_user_config
from wharf.core.enums import ComponentType
from wharf.core.errors import EntityExistsError, EntityNotFoundError, InputError
from wharf.sdk import flavors, stacks
from wharf.sdk.workspace import DEFAULT_STACK, Workspace
from wharf.store.sql import SqlStore

ORCH = ComponentType.ORCHESTRATOR
STORE = ComponentType.ARTIFACT_STORE
OP = ComponentType.STEP_OPERATOR


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def open_workspace(store: SqlStore, home: Path, **env: str) -> Workspace:
    return Workspace.open(load_config(env, home=home), store)


@pytest.fixture
def workspace(sqlite_store: SqlStore, home: Path) -> Workspace:
    # Not closed here: the sqlite_store fixture closes the store.
    return open_workspace(sqlite_store, home)


@pytest.fixture
def tiny_flavors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A third-party distribution on ``sys.path`` declaring the flavor ``tiny`` of the
    orchestrator and of the step operator (see :mod:`tests.config.flavor_dist`)."""
    monkeypatch.syspath_prepend(str(tiny_distribution(tmp_path / "site")))
    return "tiny"


def register_prod(workspace: Workspace, tmp_path: Path) -> Path:
    path = tmp_path / "prod-artifacts"
    stacks.register_component(workspace, "orch", ORCH, "local")
    stacks.register_component(workspace, "store", STORE, "local", {"path": str(path)})
    stacks.register_stack(workspace, "prod", orchestrator="orch", artifact_store="store")
    return path


# ----------------------------------------------------------------------------- parsing


def test_parse_configuration_values() -> None:
    parsed = stacks.parse_configuration(
        [
            "n=3",
            "ratio=0.5",
            "debug=true",
            "nothing=null",
            "path=/data/x",
            'tag="3"',
            "list=[1, 2]",
            'obj={"a": {"b": 1}}',
            "empty=",
            "eq=a=b",
            "nan=NaN",
            " spaced =1",
        ]
    )
    assert parsed == {
        "n": 3,
        "ratio": 0.5,
        "debug": True,
        "nothing": None,
        "path": "/data/x",
        "tag": "3",
        "list": [1, 2],
        "obj": {"a": {"b": 1}},
        "empty": "",
        "eq": "a=b",
        "nan": "NaN",
        "spaced": 1,
    }
    assert not any(isinstance(v, float) and math.isnan(v) for v in parsed.values())


@pytest.mark.parametrize(
    ("pairs", "fragment"),
    [(["novalue"], "key=value"), (["=1"], "key=value"), (["a=1", "a=2"], "more than once")],
)
def test_parse_configuration_errors(pairs: list[str], fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        stacks.parse_configuration(pairs)


def test_parse_component_type() -> None:
    assert stacks.parse_component_type("step-operator") is OP
    assert stacks.parse_component_type("Artifact_Store") is STORE
    assert stacks.parse_component_type(ORCH) is ORCH
    with pytest.raises(InputError, match=r"Unknown component type 'gpu'; known: orchestrator"):
        stacks.parse_component_type("gpu")


# ----------------------------------------------------------------------------- components


def test_register_and_list_components(workspace: Workspace, tmp_path: Path) -> None:
    orch = stacks.register_component(
        workspace, "orch", "orchestrator", "local_process", {"python": "py"}
    )
    assert (orch.type, orch.flavor, orch.configuration) == (ORCH, "local_process", {"python": "py"})
    store = stacks.register_component(workspace, "orch", STORE, "local", {"path": str(tmp_path)})
    assert store.configuration == {"path": str(tmp_path)}  # same name, other type: allowed
    assert {c.name for c in stacks.list_components(workspace, ORCH).items} == {"orch"}
    assert [c.type for c in stacks.list_components(workspace, "artifact-store").items] == [STORE]
    assert stacks.list_components(workspace).total == 2


def test_every_declared_flavor_registers(workspace: Workspace, tiny_flavors: str) -> None:
    for type, known in flavors.declared_flavors().items():
        for flavor in known:
            needs = {"fsspec": {"path": "s3://bucket/prefix"}}  # flavors without a default
            name = f"{type.value}-{flavor}"
            record = stacks.register_component(workspace, name, type, flavor, needs.get(flavor))
            assert record.flavor == flavor
    assert {c.flavor for c in stacks.list_components(workspace, OP).items} == {
        "kubernetes",
        "local_process",
        tiny_flavors,
    }


def test_a_third_party_flavor_runs_the_stack(
    workspace: Workspace, tmp_path: Path, tiny_flavors: str
) -> None:
    """Registered by name, then built from its entry point when the stack is used."""
    register_prod(workspace, tmp_path)
    stacks.register_component(workspace, "tiny-orch", ORCH, tiny_flavors)
    stacks.register_component(workspace, "tiny-op", OP, tiny_flavors)
    stacks.register_stack(
        workspace, "tiny", orchestrator="tiny-orch", artifact_store="store", step_operator="tiny-op"
    )
    stack = stacks.get_stack(workspace, "tiny")
    for kind, name in ((ORCH, "TinyOrchestrator"), (OP, "TinyStepOperator")):
        component = workspace.component_instance(stack, kind)
        assert (type(component).__module__, type(component).__name__) == (TINY_MODULE, name)


def test_unknown_flavor_lists_known_ones(workspace: Workspace) -> None:
    with pytest.raises(
        InputError, match=r"Unknown orchestrator flavor 'slurm'; known: kubernetes, local\b"
    ):
        stacks.register_component(workspace, "orch", ORCH, "slurm")
    known = ", ".join(flavors.known_flavors(OP)) or "none"
    with pytest.raises(InputError, match=f"Unknown step_operator flavor 'nope'; known: {known}."):
        stacks.register_component(workspace, "op", OP, "nope")
    assert stacks.list_components(workspace).total == 0


def test_duplicate_component(workspace: Workspace, tmp_path: Path) -> None:
    stacks.register_component(workspace, "orch", ORCH, "local_process", {"python": "a"})
    with pytest.raises(EntityExistsError, match="orch"):
        stacks.register_component(workspace, "orch", ORCH, "local_process", {"python": "b"})
    (only,) = stacks.list_components(workspace).items
    assert only.configuration == {"python": "a"}


def test_local_artifact_store_path_defaults_to_artifact_root(workspace: Workspace) -> None:
    record = stacks.register_component(workspace, "store", STORE, "local", {})
    assert record.configuration == {"path": str(workspace.config.artifact_root.absolute())}
    with pytest.raises(InputError, match=r"Unknown local option 'other'; known: path\."):
        stacks.register_component(workspace, "other", STORE, "local", {"other": "dropped"})


def test_local_artifact_store_path_is_made_absolute(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    rel = stacks.register_component(workspace, "rel", STORE, "local", {"path": "a/../b"})
    assert rel.configuration["path"] == str(tmp_path / "b")
    tilde = stacks.register_component(workspace, "tilde", STORE, "local", {"path": "~/arts"})
    assert tilde.configuration["path"] == str(tmp_path / "user" / "arts")


def test_local_artifact_store_null_path_means_default(workspace: Workspace) -> None:
    record = stacks.register_component(workspace, "s", STORE, "local", {"path": None})
    assert record.configuration["path"] == str(workspace.config.artifact_root.absolute())


@pytest.mark.parametrize("path", [2024, "", "  ", ["x"]])
def test_local_artifact_store_bad_path(workspace: Workspace, path: object) -> None:
    with pytest.raises(InputError, match="must be a directory path"):
        stacks.register_component(workspace, "s", STORE, "local", {"path": path})
    assert stacks.list_components(workspace).total == 0


def test_local_artifact_store_path_is_a_file(workspace: Workspace, tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        stacks.register_component(workspace, "s", STORE, "local", {"path": str(file)})


# ----------------------------------------------------------------------------- stacks


def test_register_stack_with_step_operator(
    workspace: Workspace, tmp_path: Path, tiny_flavors: str
) -> None:
    register_prod(workspace, tmp_path)
    op = stacks.register_component(workspace, "op", OP, tiny_flavors)
    record = stacks.register_stack(
        workspace, "gpu", orchestrator="orch", artifact_store="store", step_operator="op"
    )
    assert record.components[OP] == op.id
    described = stacks.describe_stack(workspace, "gpu")
    assert (described.orchestrator, described.artifact_store, described.step_operator) == (
        "orch",
        "store",
        "op",
    )
    assert list(described.components) == [ORCH, STORE, OP]
    assert not described.active


@pytest.mark.parametrize(
    ("slots", "error", "fragment"),
    [
        ({"orchestrator": "store", "artifact_store": "store"}, InputError, "not orchestrator"),
        ({"orchestrator": "orch", "artifact_store": "orch"}, InputError, "not artifact_store"),
        (
            {"orchestrator": "orch", "artifact_store": "store", "step_operator": "orch"},
            InputError,
            "is of type orchestrator, not step_operator",
        ),
        ({"orchestrator": "nope", "artifact_store": "store"}, EntityNotFoundError, "'nope'"),
        (
            {"orchestrator": "orch", "artifact_store": "store", "step_operator": "nope"},
            EntityNotFoundError,
            "No step_operator component named 'nope'",
        ),
    ],
)
def test_register_stack_bad_components(
    workspace: Workspace, slots: dict[str, str], error: type[Exception], fragment: str
) -> None:
    stacks.register_component(workspace, "orch", ORCH, "local")
    stacks.register_component(workspace, "store", STORE, "local")
    with pytest.raises(error, match=fragment):
        stacks.register_stack(workspace, "bad", **slots)
    with pytest.raises(EntityNotFoundError):
        workspace.store.stacks.get_stack_by_name("bad")


def test_duplicate_stack(workspace: Workspace, tmp_path: Path) -> None:
    register_prod(workspace, tmp_path)
    stacks.register_component(workspace, "orch2", ORCH, "local")
    with pytest.raises(EntityExistsError, match="prod"):
        stacks.register_stack(workspace, "prod", orchestrator="orch2", artifact_store="store")
    assert stacks.describe_stack(workspace, "prod").orchestrator == "orch"


def test_list_stacks_marks_the_active_one(workspace: Workspace, tmp_path: Path) -> None:
    register_prod(workspace, tmp_path)
    page = stacks.list_stacks(workspace)
    assert page.total == 2  # the default stack is created on first use
    by_name = {s.name: s for s in page.items}
    assert by_name[DEFAULT_STACK].active and not by_name["prod"].active
    assert by_name["prod"].components[STORE].configuration == {
        "path": str(tmp_path / "prod-artifacts")
    }
    assert by_name["prod"].step_operator is None
    data = json.loads(page.items[0].model_dump_json())
    assert set(data["components"]) == {"orchestrator", "artifact_store"}


def test_describe_stack_defaults_to_active(workspace: Workspace) -> None:
    described = stacks.describe_stack(workspace)
    assert described.name == DEFAULT_STACK and described.active
    assert described.components[STORE].configuration["path"] == str(workspace.config.artifact_root)
    with pytest.raises(EntityNotFoundError, match="No stack named 'nope'"):
        stacks.describe_stack(workspace, "nope")


# ----------------------------------------------------------------------------- active stack


def test_set_active_stack_is_used_by_new_workspaces(
    sqlite_store: SqlStore, workspace: Workspace, home: Path, tmp_path: Path
) -> None:
    write_user_config(home, {"server_url": "http://kept"})
    path = register_prod(workspace, tmp_path)
    assert stacks.set_active_stack(workspace, "prod").name == "prod"
    assert json.loads((home / "config.json").read_text()) == {
        "active_stack": "prod",
        "server_url": "http://kept",
    }
    reopened = open_workspace(sqlite_store, home)
    stack = reopened.active_stack()
    assert stack.name == "prod"
    assert reopened.component_instance(stack, STORE).path == str(path)
    assert stacks.describe_stack(reopened).name == "prod"
    assert [s.name for s in stacks.list_stacks(reopened).items if s.active] == ["prod"]
    # WHARF_ACTIVE_STACK still overrides the config file.
    overridden = open_workspace(sqlite_store, home, WHARF_ACTIVE_STACK=DEFAULT_STACK)
    assert overridden.active_stack().name == DEFAULT_STACK
    assert stacks.describe_stack(overridden).name == DEFAULT_STACK


def test_an_active_stack_deleted_by_someone_else_says_what_to_do(
    sqlite_store: SqlStore, workspace: Workspace, home: Path, tmp_path: Path
) -> None:
    """Another user (an admin, in team mode) deleted the stack this user had chosen: the run
    said only "No stack named 'prod'." (the QA pass)."""
    register_prod(workspace, tmp_path)
    stacks.set_active_stack(workspace, "prod")
    workspace.store.stacks.delete_stack(workspace.store.stacks.get_stack_by_name("prod").id)
    reopened = open_workspace(sqlite_store, home)
    with pytest.raises(EntityNotFoundError) as gone:
        reopened.active_stack()
    assert str(gone.value).startswith("The active stack 'prod' does not exist")
    assert "`wharf stack set NAME`" in str(gone.value)


def test_set_unknown_stack_writes_nothing(workspace: Workspace, home: Path) -> None:
    with pytest.raises(EntityNotFoundError, match="No stack named 'nope'"):
        stacks.set_active_stack(workspace, "nope")
    assert not (home / "config.json").exists()


def test_set_default_stack_on_a_fresh_store(workspace: Workspace, home: Path) -> None:
    assert stacks.set_active_stack(workspace, DEFAULT_STACK).name == DEFAULT_STACK
    assert json.loads((home / "config.json").read_text()) == {"active_stack": DEFAULT_STACK}
