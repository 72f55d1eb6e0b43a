"""``wharf stack show | set | delete`` take a stack's name, its id or an id prefix, as the ids
``wharf stack list`` shows (runs, steps, artifacts and schedules are named the same ways)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace


@pytest.fixture
def stack_ids(home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Stacks ``prod`` and ``dev`` besides ``default``, by name: their ids."""
    monkeypatch.delenv("WHARF_ACTIVE_STACK", raising=False)
    workspace = Workspace.open(load_config())
    try:
        stacks.register_component(workspace, "orch", ComponentType.ORCHESTRATOR, "local")
        ids = {}
        for name in ("prod", "dev"):
            record = stacks.register_stack(
                workspace, name, orchestrator="orch", artifact_store="default"
            )
            ids[name] = str(record.id)
    finally:
        workspace.close()
    return ids


def wharf(*args: str) -> tuple[int, str, str]:
    """``wharf ARGS`` in a process of its own: its exit code, stdout and stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
        timeout=60,
    )
    assert "Traceback" not in result.stderr
    return result.returncode, result.stdout, result.stderr


def test_a_stack_is_shown_by_id_and_id_prefix(stack_ids: dict[str, str]) -> None:
    prod = stack_ids["prod"]
    for text in (prod, prod[:8], prod.upper()):
        code, out, err = wharf("stack", "show", text, "-o", "json")
        assert code == 0, err
        assert json.loads(out)["name"] == "prod"


def test_a_stack_is_set_and_deleted_by_id_prefix(stack_ids: dict[str, str]) -> None:
    code, out, err = wharf("stack", "set", stack_ids["prod"][:6])
    assert code == 0, err
    assert "'prod'" in out
    code, _, err = wharf("stack", "delete", stack_ids["prod"], "--yes")
    assert code != 0 and "active stack" in err  # still refused as the active one
    code, out, err = wharf("stack", "delete", stack_ids["dev"][:6], "--yes")
    assert code == 0, err
    assert out.strip() == "Deleted stack 'dev'."


def test_unknown_ids_are_one_line_errors(stack_ids: dict[str, str]) -> None:
    code, _, err = wharf("stack", "show", "0123abcd-0000-0000-0000-000000000000")
    assert code == 1 and err.strip() == (
        "Error: No stack named '0123abcd-0000-0000-0000-000000000000'."
    )
    code, _, err = wharf("stack", "show", "nosuch")
    assert code == 1 and err.strip() == "Error: No stack named 'nosuch'."


def test_no_name_takes_over_another_stacks_id(stack_ids: dict[str, str]) -> None:
    """The QA pass named a stack with another stack's id, then with its id prefix: ``stack
    show`` and ``stack delete`` by that id acted on the look-alike (in team mode, a member's
    stack could pass for the team's default)."""
    prod = stack_ids["prod"]
    code, _, err = wharf("stack", "register", prod, "-o", "orch", "-a", "default")
    assert code == 1 and "A stack name must not be a UUID" in err, err
    code, _, err = wharf("stack", "register", prod[:8], "-o", "orch", "-a", "default")
    assert code == 0, err  # a short hex name is a name like any other...
    code, _, err = wharf("stack", "show", prod[:8])
    assert code == 1 and len(err.strip().splitlines()) == 1, err  # ...but names two stacks
    assert f"is the name of stack '{prod[:8]}'" in err and f"stack 'prod' ({prod})" in err
    code, out, err = wharf("stack", "show", prod, "-o", "json")
    assert code == 0 and json.loads(out)["name"] == "prod", err
    code, out, err = wharf("stack", "delete", prod, "--yes")
    assert code == 0 and "Deleted stack 'prod'" in out, err
    code, out, err = wharf("stack", "show", prod[:8], "-o", "json")  # one meaning left
    assert code == 0 and json.loads(out)["name"] == prod[:8], err
