"""The options of the ``local_process`` orchestrator and step operator are checked when a
component is registered or updated (``wharf.execution.local_process.check_configuration``): an
unknown key or a value no run could use is one plain error, and nothing is stored."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error, wharf
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType
from wharf.core.errors import InputError
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace

TYPES = [ComponentType.ORCHESTRATOR, ComponentType.STEP_OPERATOR]


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace.open(load_config({}, home=tmp_path / "home"))
    yield ws
    ws.close()


@pytest.mark.parametrize("type", TYPES, ids=lambda t: t.value)
@pytest.mark.parametrize(
    ("configuration", "expected"),
    [
        ({"code_travels": "maybe"}, "code_travels must be true or false, not 'maybe'"),
        ({"pyhton": "/usr/bin/python3"}, "Unknown local_process option 'pyhton' (did you mean"),
        ({"gpus": 2}, "Unknown local_process option 'gpus'; known: python, code_travels."),
        ({"python": 3}, "python must be the path of a Python interpreter, not 3"),
        ({"python": " "}, "python must be the path of a Python interpreter, not ' '"),
    ],
)
def test_unusable_options_are_refused(
    workspace: Workspace, type: ComponentType, configuration: dict[str, object], expected: str
) -> None:
    with pytest.raises(InputError) as refused:
        stacks.register_component(workspace, "procs", type, "local_process", configuration)
    assert expected in str(refused.value)
    assert [c.name for c in stacks.list_components(workspace, type).items] == []


@pytest.mark.parametrize("type", TYPES, ids=lambda t: t.value)
def test_documented_options_are_kept(workspace: Workspace, type: ComponentType) -> None:
    options = {"python": sys.executable, "code_travels": "true"}
    record = stacks.register_component(workspace, "procs", type, "local_process", options)
    assert record.configuration == options
    updated = stacks.update_component(workspace, "procs", type, {"code_travels": False})
    assert updated.configuration == {"python": sys.executable, "code_travels": False}
    with pytest.raises(InputError, match="must be true or false, not 'nah'"):
        stacks.update_component(workspace, "procs", type, {"code_travels": "nah"})


def test_the_cli_gives_one_line_and_registers_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WHARF_STORE_URL", raising=False)
    register = ("component", "register", "procs", "-t", "orchestrator", "-f", "local_process")
    assert_one_line_error(
        wharf(*register, "-c", "code_travels=maybe"),
        "Error: The component option code_travels must be true or false, not 'maybe'.",
    )
    listed = wharf("component", "list", "-t", "orchestrator", "-o", "json")
    assert [c["name"] for c in json.loads(listed.stdout)] == ["default"]
