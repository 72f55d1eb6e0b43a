"""Choosing the project on the embedded store: ``WHARF_PROJECT`` names it, and it is created on
first use like the default project (the embedded store has no other way to create one)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e import steps_lib
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace


@pipeline(name="embedded_project")
def embedded_project() -> None:
    steps_lib.produce(value=3)


def test_pipelines_run_in_the_configured_project(wharf_home: Path) -> None:
    workspace = Workspace.open(load_config({"WHARF_HOME": str(wharf_home), "WHARF_PROJECT": "ml"}))
    try:
        run = embedded_project.run_in(workspace)
        assert workspace.project.name == "ml" and run.project_id == workspace.project.id
    finally:
        workspace.close()
    again = Workspace.open(load_config({"WHARF_HOME": str(wharf_home), "WHARF_PROJECT": "ml"}))
    try:
        assert again.project.id == run.project_id  # created once
        default = Workspace.open(load_config({"WHARF_HOME": str(wharf_home)}))
        assert default.project.name == "default" and default.project.id != run.project_id
        default.close()
    finally:
        again.close()
