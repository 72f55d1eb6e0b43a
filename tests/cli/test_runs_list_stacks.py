"""``wharf runs list`` names the stack each run ran on, as ``runs show`` does (a deleted stack as
``(deleted stack)``; JSON ``stack_name``/``stack_deleted``), on the quick path and the normal
store alike. Real subprocesses against a real store."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

import pytest

from tests.cli.test_cli import wharf
from wharf.config.global_config import load_config
from wharf.config.spec import PipelineSpec
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import RunCreate, RunUpdate, SnapshotCreate


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WHARF_HOME", str(home))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    return home


def _runs_on_two_stacks(tmp_path: Path) -> None:
    """Stack ``prod`` beside ``default``, and a finished run on each (``on-prod`` last)."""
    from wharf.sdk import stacks

    workspace = Workspace.open(load_config())
    try:
        stacks.register_component(workspace, "orch", ComponentType.ORCHESTRATOR, "local")
        stacks.register_component(
            workspace, "store", ComponentType.ARTIFACT_STORE, "local", {"path": str(tmp_path)}
        )
        stacks.register_stack(workspace, "prod", orchestrator="orch", artifact_store="store")
        store = workspace.store
        pipeline = store.pipelines.get_or_create(workspace.project.id, "training")
        for name, stack in (("on-default", "default"), ("on-prod", "prod")):
            snapshot = store.snapshots.create(
                SnapshotCreate(
                    project_id=workspace.project.id,
                    pipeline_id=pipeline.id,
                    stack_id=stacks.get_stack(workspace, stack).id,
                    spec=PipelineSpec(name="training", steps={}),
                )
            )
            run = store.runs.create(
                RunCreate(
                    project_id=workspace.project.id,
                    pipeline_id=pipeline.id,
                    snapshot_id=snapshot.id,
                    name=name,
                    status=ExecutionStatus.RUNNING,
                )
            )
            store.runs.update(run.id, RunUpdate(status=ExecutionStatus.COMPLETED))
    finally:
        workspace.close()


def _listed(home: Path, *args: str, normal: bool = False) -> str:
    env = {"WHARF_STORE_URL": f"sqlite+pysqlite:///{home / 'wharf.db'}"} if normal else None
    result = wharf("runs", "list", *args, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _stacks(home: Path, *, normal: bool = False) -> dict[str, str]:
    """Run name -> its STACK cell, read by the header's column positions."""
    lines = _listed(home, normal=normal).splitlines()
    header = lines[1]
    assert header.split() == ["NAME", "STATUS", "STACK", "CREATED", "END_TIME", "ID"]
    start, end = header.index("STACK"), header.index("CREATED")
    return {row.split()[0]: row[start:end].strip() for row in lines[2:]}


def _stacks_json(home: Path, *, normal: bool = False) -> dict[str, tuple[object, object]]:
    runs = json.loads(_listed(home, "-o", "json", normal=normal))
    for run in runs:
        UUID(run["id"])  # still the run's record, with the stack beside it
    return {run["name"]: (run["stack_name"], run["stack_deleted"]) for run in runs}


def test_runs_list_names_each_runs_stack_and_says_when_it_was_deleted(
    home: Path, tmp_path: Path
) -> None:
    _runs_on_two_stacks(tmp_path)
    for normal in (False, True):
        assert _stacks(home, normal=normal) == {"on-prod": "prod", "on-default": "default"}
        assert _stacks_json(home, normal=normal) == {
            "on-prod": ("prod", False),
            "on-default": ("default", False),
        }
    result = wharf("stack", "delete", "prod", "-y")
    assert result.returncode == 0, result.stderr
    for normal in (False, True):
        stacks = _stacks(home, normal=normal)
        assert stacks == {"on-prod": "(deleted stack)", "on-default": "default"}
        assert _stacks_json(home, normal=normal) == {
            "on-prod": (None, True),
            "on-default": ("default", False),
        }
    shown = wharf("runs", "show", "on-prod").stdout.splitlines()
    assert "Stack     (deleted stack)" in shown  # the same words as runs show
    assert _listed(home) == _listed(home, normal=True)
