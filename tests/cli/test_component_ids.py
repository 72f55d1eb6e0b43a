"""``wharf component update | delete`` take a component's name, id or id prefix, as
``wharf component list`` shows ids; ``--type`` is needed only when several types use a name."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace


def wharf(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
        timeout=60,
    )
    assert "Traceback" not in result.stderr
    return result


def ok(*args: str) -> str:
    result = wharf(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def register(name: str, type_: str, configuration: dict[str, str] | None = None) -> str:
    """Register component NAME (flavor local) in the workspace of ``WHARF_HOME``, as ``wharf
    component register`` does (tested through the command in test_stacks.py); its id."""
    with closing(Workspace.open()) as workspace:
        made = stacks.register_component(workspace, name, type_, "local", configuration or {})
    return str(made.id)


def test_components_are_updated_and_deleted_by_name_id_or_prefix(
    home: Path, tmp_path: Path
) -> None:
    register("orch", "orchestrator")
    store_id = register("store", "artifact_store", {"path": str(tmp_path / "a")})
    updated = ok("component", "update", store_id[:8], "-c", f"path={tmp_path / 'b'}")
    assert updated.startswith("Updated artifact_store component 'store'")
    assert ok("component", "delete", "orch", "--yes").strip() == "Deleted orchestrator 'orch'."
    assert ok("component", "delete", store_id, "--yes").strip() == "Deleted artifact_store 'store'."


def test_a_name_several_types_use_still_needs_the_type(home: Path) -> None:
    with closing(Workspace.open()) as workspace:  # as 'wharf stack list' makes it first
        stacks.ensure_default_stack(workspace)  # an orchestrator and an artifact store 'default'
    result = wharf("component", "delete", "default", "--yes")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "Error: Components named 'default' are of types orchestrator and artifact_store: "
        "give --type."
    )
    unknown = wharf("component", "delete", "nosuch", "--yes")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "Error: No component named 'nosuch'."


def test_a_misspelt_component_name_suggests_the_close_names(home: Path) -> None:
    register("orch", "orchestrator")
    for args, message in [
        (("update", "orhc", "-c", "a=1"), "No component named 'orhc'; did you mean 'orch'?"),
        (("delete", "orhc", "--yes"), "No component named 'orhc'; did you mean 'orch'?"),
        (
            ("delete", "orhc", "-t", "orchestrator", "--yes"),
            "No orchestrator component named 'orhc'; did you mean 'orch'?",
        ),
        (("delete", "zzzz", "--yes"), "No component named 'zzzz'."),
    ]:
        result = wharf("component", *args)
        assert (result.returncode, result.stderr.strip()) == (1, f"Error: {message}"), args


def test_no_name_takes_over_another_components_id(home: Path) -> None:
    orch = register("orch", "orchestrator")
    refused = wharf("component", "register", orch, "--type", "orchestrator", "--flavor", "local")
    assert refused.returncode == 1
    assert "A component name must not be a UUID" in refused.stderr
    register(orch[:8], "orchestrator")  # a short hex name is a name like any other...
    both = wharf("component", "delete", orch[:8], "--yes")  # ...but names two components
    assert both.returncode == 1
    assert f"is the name of component '{orch[:8]}'" in both.stderr
    assert f"component 'orch' ({orch})" in both.stderr
    assert ok("component", "delete", orch, "--yes").strip() == "Deleted orchestrator 'orch'."
    deleted = ok("component", "delete", orch[:8], "--yes").strip()  # one meaning left
    assert deleted == f"Deleted orchestrator '{orch[:8]}'."


PIPELINE = """
from wharf import pipeline, step

@step
def make() -> int:
    return 7

@pipeline
def p() -> None:
    make()

p()
"""


def test_an_artifact_store_that_holds_artifacts_keeps_its_path(home: Path, tmp_path: Path) -> None:
    """A new path left every artifact written under the old one unloadable ("outside the
    artifact store"), though the command said it updated the store (the QA pass)."""
    script = tmp_path / "p.py"
    script.write_text(PIPELINE)
    ran = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    moved = wharf("component", "update", "default", "-t", "artifact_store", "-c", "path=/tmp/x")
    assert moved.returncode == 1
    assert moved.stderr.startswith("Error: Artifact store 'default' holds artifact versions under")
    assert "Register a new artifact store" in moved.stderr
    assert ok("artifacts", "load", "p::make::output").strip() == "7"
