# ruff: noqa: F811  (the home and prod fixtures are imported from stacks_cli)
"""``wharf stack delete``, ``wharf component delete`` and ``wharf component update``, and what
they refuse (a stack or component in use, an unfinished run), run as real subprocesses against a
real store; a run's stack once that stack is deleted."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.stacks_cli import (  # noqa: F401 (fixtures)
    as_json,
    assert_one_line_error,
    configuration,
    home,
    ok,
    open_workspace,
    prod,
    run_all,
    snapshot,
    wharf,
)
from tests.cli.terminal import answered
from wharf.config.global_config import load_config
from wharf.config.spec import PipelineSpec
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.store.models import RunCreate, RunUpdate, SnapshotCreate


def test_delete_a_stack_then_its_components(prod: Path) -> None:
    in_use = wharf("component", "delete", "orch", "--type", "orchestrator", "--yes")
    assert_one_line_error(in_use, "Component 'orch' (orchestrator) is used by stack(s) prod")
    declined = answered("n", "stack", "delete", "prod")
    assert declined.returncode != 0
    assert "Delete stack 'prod'?" in declined.stdout
    assert "prod" in stack_names()
    assert ok("stack", "delete", "prod", "-y") == "Deleted stack 'prod'.\n"
    assert "prod" not in stack_names()
    confirmed = answered("y", "component", "delete", "orch", "-t", "orchestrator")
    assert confirmed.returncode == 0, confirmed.stderr
    assert confirmed.stdout.endswith("Deleted orchestrator 'orch'.\n")
    ok("component", "delete", "store", "--type", "artifact-store", "--yes")
    names = {(c["type"], c["name"]) for c in snapshot()[0]}
    assert names == {("orchestrator", "default"), ("artifact_store", "default")}


def stack_names() -> set[str]:
    return {s["name"] for s in snapshot()[1]}


def test_a_run_shows_its_stack_and_once_the_stack_is_deleted_says_so(prod: Path) -> None:
    """Deleting a stack clears its id from its runs: ``runs show`` says the stack was deleted
    (on the quick path and the normal store alike) instead of naming none."""
    workspace = Workspace.open(load_config())
    try:
        store = workspace.store
        pipeline = store.pipelines.get_or_create(workspace.project.id, "training")
        snapshot_ = store.snapshots.create(
            SnapshotCreate(
                project_id=workspace.project.id,
                pipeline_id=pipeline.id,
                stack_id=stacks.get_stack(workspace, "prod").id,
                spec=PipelineSpec(name="training", steps={}),
            )
        )
        run = store.runs.create(
            RunCreate(
                project_id=workspace.project.id,
                pipeline_id=pipeline.id,
                snapshot_id=snapshot_.id,
                name="done",
                status=ExecutionStatus.RUNNING,
            )
        )
        store.runs.update(run.id, RunUpdate(status=ExecutionStatus.COMPLETED))
    finally:
        workspace.close()
    normal = {"WHARF_STORE_URL": f"sqlite+pysqlite:///{prod.parent / 'home' / 'wharf.db'}"}

    def stack_line(env: dict[str, str] | None = None) -> str:
        return next(
            line
            for line in ok("runs", "show", "done", env=env).splitlines()[:4]
            if line.startswith("Stack")
        )

    def stack_json(env: dict[str, str] | None = None) -> tuple[object, object]:
        shown = json.loads(ok("runs", "show", "done", "-o", "json", env=env))
        return shown["stack_name"], shown["stack_deleted"]

    # before: one path per format (runs list names it on both, in both: test_runs_list_stacks)
    assert stack_line() == "Stack     prod"
    assert stack_json(normal) == ("prod", False)
    ok("stack", "delete", "prod", "-y")
    assert stack_line() == stack_line(normal) == "Stack     (deleted stack)"
    assert stack_json() == stack_json(normal) == (None, True)


def test_bad_deletions(prod: Path) -> None:
    before = snapshot()
    cases = [
        (("stack", "delete", "nope", "-y"), "No stack named 'nope'"),
        (("stack", "delete", "default", "-y"), "Stack 'default' is the active stack; switch to"),
        (("component", "delete", "nope", "-t", "orchestrator", "-y"), "No orchestrator component"),
        (("component", "delete", "orch", "-t", "artifact_store", "-y"), "is of type orchestrator"),
        (("component", "delete", "orch", "-t", "gpu", "-y"), "Unknown component type 'gpu'"),
        (
            ("component", "delete", "default", "-t", "orchestrator", "-y"),
            "used by stack(s) default",
        ),
    ]
    results = run_all(*(args for args, _ in cases))
    for result, (_, fragment) in zip(results, cases, strict=True):
        assert_one_line_error(result, fragment)
    with open_workspace() as workspace:  # ``wharf stack set``: test_stacks.py
        stacks.set_active_stack(workspace, "prod")
    assert_one_line_error(
        wharf("stack", "delete", "prod", "-y"),
        "Stack 'prod' is the active stack; switch to another first: wharf stack set NAME.",
    )
    with open_workspace() as workspace:
        stacks.set_active_stack(workspace, "default")
    assert_one_line_error(
        wharf("stack", "delete", "prod", "-y", env={"WHARF_ACTIVE_STACK": "prod"}),
        "Stack 'prod' is the active stack; set WHARF_ACTIVE_STACK to another stack first.",
    )
    assert snapshot() == before


# ----------------------------------------------------------------------------- update


def test_update_a_component(prod: Path, home: Path, tmp_path: Path) -> None:
    workspace = Workspace.open(load_config())
    try:  # flavors with options to set (the local orchestrator has none)
        stacks.register_component(
            workspace, "remote", ComponentType.ARTIFACT_STORE, "fsspec", {"path": "s3://b/a"}
        )
        stacks.register_component(
            workspace, "procs", ComponentType.ORCHESTRATOR, "local_process", {"python": "py"}
        )
    finally:
        workspace.close()
    update = ("component", "update")
    out = ok(*update, "remote", "-t", "artifact_store", "-c", "profile=wrong")
    assert out == "Updated artifact_store component 'remote': path=s3://b/a, profile=wrong.\n"
    out = ok(
        *update,
        *("remote", "--type", "artifact-store", "-c", "profile=prod"),
        *("-c", "default_block_size=4", "-c", 'client_kwargs={"a": [1]}'),
    )
    assert out == (
        "Updated artifact_store component 'remote': client_kwargs={\"a\": [1]}, "
        "default_block_size=4, path=s3://b/a, profile=prod.\n"
    )
    assert configuration("artifact_store", "remote") == {
        "path": "s3://b/a",
        "profile": "prod",
        "default_block_size": 4,
        "client_kwargs": {"a": [1]},
    }
    out = ok(*update, "remote", "-t", "artifact_store", "--remove", "client_kwargs")
    assert out == (
        "Updated artifact_store component 'remote': default_block_size=4, path=s3://b/a, "
        "profile=prod.\n"
    )
    out = ok(*update, "remote", "-t", "artifact_store", "-r", "profile", "-c", "anon=true")
    assert out == (
        "Updated artifact_store component 'remote': anon=true, default_block_size=4, "
        "path=s3://b/a.\n"
    )
    out = ok(*update, "procs", "-t", "orchestrator", "-r", "python")
    assert out == "Updated orchestrator component 'procs': no configuration.\n"
    assert configuration("orchestrator", "procs") == {}
    # validated like a new component: a local store's path is made absolute, and defaults
    out = ok("component", "update", "store", "-t", "artifact-store", "-c", "path=rel/new")
    assert out == f"Updated artifact_store component 'store': path={tmp_path / 'rel' / 'new'}.\n"
    ok("component", "update", "store", "-t", "artifact_store", "-r", "path")
    assert configuration("artifact_store", "store") == {"path": str(home / "artifacts")}
    (described,) = [s for s in snapshot()[1] if s["name"] == "prod"]
    assert described["components"]["artifact_store"]["configuration"] == {
        "path": str(home / "artifacts")
    }


def test_bad_updates(prod: Path, tmp_path: Path) -> None:
    file = tmp_path / "a-file"
    file.write_text("x")
    moved = tmp_path / "moved"
    before = snapshot()
    update = ("component", "update")
    cases = [
        (("orch", "-t", "orchestrator"), "Nothing to change: give -c KEY=VALUE or --remove KEY."),
        (
            ("store", "-t", "artifact_store", "-r", "ghost"),
            "Component 'store' has no configuration key 'ghost' to remove; its keys: path.",
        ),
        (("orch", "-t", "orchestrator", "-r", "a", "-c", "a=1"), "'a' is both set and removed"),
        (("orch", "-t", "orchestrator", "-c", "novalue"), "key=value"),
        (("orch", "-t", "gpu", "-c", "a=1"), "Unknown component type 'gpu'"),
        (("nope", "-t", "orchestrator", "-c", "a=1"), "No orchestrator component named 'nope'"),
        (("orch", "-t", "artifact_store", "-c", "a=1"), "is of type orchestrator"),
        (("store", "-t", "artifact_store", "-c", "path=42"), "directory path"),
        (("store", "-t", "artifact_store", "-c", f"path={file}"), "not a directory"),
    ]
    results = run_all(*((*update, *args) for args, _ in cases))
    for result, (_, fragment) in zip(results, cases, strict=True):
        assert_one_line_error(result, fragment)
    # a run on the stack is unfinished: refused, naming it; allowed once it finished
    workspace = Workspace.open(load_config())
    try:
        store = workspace.store
        stack = stacks.get_stack(workspace, "prod")
        pipeline = store.pipelines.get_or_create(workspace.project.id, "training")
        snapshot_ = store.snapshots.create(
            SnapshotCreate(
                project_id=workspace.project.id,
                pipeline_id=pipeline.id,
                stack_id=stack.id,
                spec=PipelineSpec(name="training", steps={}),
            )
        )
        run = store.runs.create(
            RunCreate(
                project_id=workspace.project.id,
                pipeline_id=pipeline.id,
                snapshot_id=snapshot_.id,
                name="busy",
                status=ExecutionStatus.RUNNING,
            )
        )
        assert_one_line_error(
            wharf(*update, "store", "-t", "artifact_store", "-c", f"path={moved}"),
            "Component 'store' (artifact_store) is used by unfinished run(s) busy: wait for them",
        )
        assert snapshot() == before
        store.runs.update(run.id, RunUpdate(status=ExecutionStatus.FAILED))
    finally:
        workspace.close()
    ok(*update, "store", "-t", "artifact_store", "-c", f"path={moved}")
    assert configuration("artifact_store", "store") == {"path": str(moved)}
