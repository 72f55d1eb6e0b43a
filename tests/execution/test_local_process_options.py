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
GRACE_MUST = "stop_grace_period must be a number of seconds >= 0,"


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
        (
            {"gpus": 2},
            "Unknown local_process option 'gpus'; known: python, code_travels, stop_grace_period.",
        ),
        ({"stop_grace": 5}, "Unknown local_process option 'stop_grace' (did you mean"),
        ({"python": 3}, "python must be the path of a Python interpreter, not 3"),
        ({"python": " "}, "python must be the path of a Python interpreter, not ' '"),
        ({"stop_grace_period": -1}, f"{GRACE_MUST} not -1"),
        ({"stop_grace_period": "soon"}, f"{GRACE_MUST} not 'soon'"),
        ({"stop_grace_period": "inf"}, f"{GRACE_MUST} not 'inf'"),
        ({"stop_grace_period": float("nan")}, f"{GRACE_MUST} not nan"),
        ({"stop_grace_period": True}, f"{GRACE_MUST} not True"),
        ({"stop_grace_period": [5]}, f"{GRACE_MUST} not [5]"),
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


@pytest.mark.parametrize("type", TYPES, ids=lambda t: t.value)
@pytest.mark.parametrize("grace", [0, 5, 2.5, "7", " 0.5 "])
def test_a_stop_grace_period_of_seconds_is_kept(
    workspace: Workspace, type: ComponentType, grace: object
) -> None:
    options = {"stop_grace_period": grace}
    record = stacks.register_component(workspace, "procs", type, "local_process", options)
    assert record.configuration == options
    with pytest.raises(InputError, match=f"{GRACE_MUST} not -0.5"):
        stacks.update_component(workspace, "procs", type, {"stop_grace_period": -0.5})
    assert stacks.list_components(workspace, type).items[0].configuration == options


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
    assert_one_line_error(
        wharf(*register, "-c", "stop_grace_period=-3"),
        "Error: The component option stop_grace_period must be a number of seconds >= 0, not -3.",
    )
    listed = wharf("component", "list", "-t", "orchestrator", "-o", "json")
    assert [c["name"] for c in json.loads(listed.stdout)] == ["default"]
