"""``wharf component ...`` and ``wharf stack ...``, run as real subprocesses against a real store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.config.flavor_dist import TINY_MODULE, tiny_distribution
from wharf.config.global_config import load_config
from wharf.config.spec import PipelineSpec
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.sdk.flavors import known_flavors
from wharf.sdk.workspace import Workspace
from wharf.store.models import RunCreate, RunUpdate, SnapshotCreate


def wharf(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
        timeout=60,
    )


def ok(*args: str, env: dict[str, str] | None = None) -> str:
    result = wharf(*args, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def as_json(*args: str, env: dict[str, str] | None = None) -> Any:
    return json.loads(ok(*args, "-o", "json", env=env))


def assert_one_line_error(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0], lines[0]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WHARF_HOME", str(home))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def prod(home: Path, tmp_path: Path) -> Path:
    """Components ``orch`` and ``store`` (at the returned path) and the stack ``prod``.

    Registered in-process (fast); ``test_register_stack`` covers the same through the CLI.
    """
    from wharf.sdk import stacks

    path = tmp_path / "prod-artifacts"
    workspace = Workspace.open(load_config())
    try:
        stacks.register_component(workspace, "orch", ComponentType.ORCHESTRATOR, "local")
        stacks.register_component(
            workspace, "store", ComponentType.ARTIFACT_STORE, "local", {"path": str(path)}
        )
        stacks.register_stack(workspace, "prod", orchestrator="orch", artifact_store="store")
    finally:
        workspace.close()
    return path


def run_all(*calls: tuple[str, ...]) -> list[subprocess.CompletedProcess[str]]:
    """Independent ``wharf`` calls, run concurrently to keep the suite fast."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda args: wharf(*args), calls))


def test_help_lists_the_groups() -> None:
    out = ok("--help")
    assert "stack" in out and "component" in out
    assert "register" in ok("stack", "--help") and "register" in ok("component", "--help")


def test_register_and_list_components(home: Path, tmp_path: Path) -> None:
    register = ("component", "register")
    local, remote = run_all(
        (*register, "store", "--type", "artifact-store", "--flavor", "local", "-c", "path=rel/dir"),
        # values are JSON, else text; fsspec passes every other key to its backend
        (
            *register,
            *("remote", "-t", "artifact_store", "-f", "fsspec", "-c", "path=s3://bucket/arts"),
            *("-c", "anon=true", "-c", 'profile="7"', "-c", "default_block_size=3"),
        ),
    )
    assert "Registered artifact_store 'store'" in local.stdout, local.stderr
    assert "Registered artifact_store 'remote'" in remote.stdout, remote.stderr
    components = as_json("component", "list")
    assert {(c["name"], c["type"]) for c in components} == {
        ("store", "artifact_store"),
        ("remote", "artifact_store"),
        ("default", "artifact_store"),  # the default stack's components exist from first use
        ("default", "orchestrator"),
    }
    stores = {c["name"]: c for c in as_json("component", "list", "-t", "artifact_store")}
    assert stores["store"]["configuration"] == {
        "path": str(home.parent / "rel" / "dir"),  # resolved against the caller's directory
    }
    assert stores["remote"]["configuration"] == {
        "path": "s3://bucket/arts",
        "anon": True,
        "profile": "7",
        "default_block_size": 3,
    }
    assert [c["name"] for c in as_json("component", "list", "-t", "orchestrator")] == ["default"]
    table = ok("component", "list")
    assert "store" in table and '"default_block_size": 3' in table and "artifact_store" in table


def test_local_artifact_store_path_defaults_to_artifact_root(home: Path) -> None:
    ok("component", "register", "plain", "-t", "artifact_store", "-f", "local")
    (store,) = [c for c in as_json("component", "list") if c["name"] == "plain"]
    assert store["configuration"] == {"path": str(home / "artifacts")}


def test_register_stack(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "arts"
    ok("component", "register", "orch", "--type", "orchestrator", "--flavor", "local")
    ok(
        "component",
        "register",
        "store",
        "-t",
        "artifact_store",
        "-f",
        "local",
        "-c",
        f"path={path}",
    )
    out = ok("stack", "register", "prod", "--orchestrator", "orch", "--artifact-store", "store")
    assert "Registered stack 'prod'" in out
    shown = as_json("stack", "show", "prod")
    assert shown["components"]["artifact_store"]["configuration"] == {"path": str(path)}


def test_list_and_show_stacks(prod: Path) -> None:
    stacks = {s["name"]: s for s in as_json("stack", "list")}
    assert set(stacks) == {"default", "prod"}
    assert stacks["default"]["active"] and not stacks["prod"]["active"]
    assert stacks["prod"]["components"]["artifact_store"]["configuration"] == {"path": str(prod)}
    assert "step_operator" not in stacks["prod"]["components"]

    table = ok("stack", "list").splitlines()
    (default_row,) = [line for line in table if " default " in line]
    (prod_row,) = [line for line in table if " prod " in line]
    assert "*" in default_row and "*" not in prod_row
    assert "orch" in prod_row and "store" in prod_row

    shown = as_json("stack", "show", "prod")
    assert shown["name"] == "prod" and shown["active"] is False
    assert shown["components"]["orchestrator"]["name"] == "orch"
    assert shown["components"]["artifact_store"]["configuration"]["path"] == str(prod)
    text = ok("stack", "show", "prod")
    assert "prod" in text and "orch" in text and str(prod) in text
    assert as_json("stack", "show")["name"] == "default"  # the active stack by default


def test_stack_with_step_operator(prod: Path) -> None:
    assert "local_process" in known_flavors(ComponentType.STEP_OPERATOR)
    ok("component", "register", "op", "-t", "step-operator", "-f", "local_process")
    ok("stack", "register", "gpu", "-o", "orch", "-a", "store", "-s", "op")
    shown = as_json("stack", "show", "gpu")
    assert shown["components"]["step_operator"]["flavor"] == "local_process"


def test_a_third_party_flavor_is_listed_registered_and_runs(
    prod: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A distribution that declares a ``wharf.flavors`` entry point, found on the path."""
    site = str(tiny_distribution(tmp_path / "site"))
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [site, os.environ.get("PYTHONPATH")]))}
    without, shown = (
        " ".join(ok("component", "register", "--help", env=e).split()) for e in (None, env)
    )
    assert "orchestrator: kubernetes, local, local_process;" in without
    assert "orchestrator: kubernetes, local, local_process, tiny;" in shown
    ok("component", "register", "tiny-orch", "-t", "orchestrator", "-f", "tiny", env=env)
    ok("stack", "register", "tiny", "-o", "tiny-orch", "-a", "store", env=env)
    assert as_json("stack", "show", "tiny")["components"]["orchestrator"]["flavor"] == "tiny"

    from tests.e2e import steps_lib
    from wharf import pipeline

    @pipeline(name="tiny_pipeline")
    def p() -> None:
        steps_lib.double(steps_lib.produce())

    monkeypatch.syspath_prepend(site)
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "tiny")
    workspace = Workspace.open(load_config())
    try:
        orchestrator = workspace.component_instance(
            workspace.active_stack(), ComponentType.ORCHESTRATOR
        )
        assert type(orchestrator).__module__ == TINY_MODULE
        assert p.run_in(workspace).status.value == "completed"
    finally:
        workspace.close()


def test_set_stack_is_used_by_pipeline_runs(prod: Path, home: Path) -> None:
    assert "prod" in ok("stack", "set", "prod")
    assert json.loads((home / "config.json").read_text())["active_stack"] == "prod"
    assert [s["name"] for s in as_json("stack", "list") if s["active"]] == ["prod"]
    assert as_json("stack", "show")["name"] == "prod"

    from tests.e2e import steps_lib
    from wharf import pipeline

    @pipeline(name="stack_pipeline")
    def p() -> None:
        steps_lib.double(steps_lib.produce())

    workspace = Workspace.open(load_config())
    try:
        stack = workspace.active_stack()
        assert stack.name == "prod"
        store = workspace.component_instance(stack, ComponentType.ARTIFACT_STORE)
        assert store.path == str(prod)
        run = p.run_in(workspace)
        assert run.status.value == "completed"
        assert workspace.store.snapshots.get(run.snapshot_id).stack_id == stack.id
    finally:
        workspace.close()
    versions = as_json("artifacts", "list", "--versions")
    assert len(versions) == 2
    assert all(v["uri"].startswith(str(prod) + os.sep) for v in versions)


def test_env_overrides_the_configured_stack(prod: Path) -> None:
    override = {"WHARF_ACTIVE_STACK": "default"}
    result = wharf("stack", "set", "prod", env=override)
    assert result.returncode == 0 and "WHARF_ACTIVE_STACK=default overrides" in result.stderr
    assert [s["name"] for s in as_json("stack", "list", env=override) if s["active"]] == ["default"]
    assert as_json("stack", "show", env=override)["name"] == "default"
    assert as_json("stack", "show")["name"] == "prod"


def test_set_default_on_a_fresh_home(home: Path) -> None:
    ok("stack", "set", "default")
    assert json.loads((home / "config.json").read_text()) == {"active_stack": "default"}


# ----------------------------------------------------------------------------- bad input


def snapshot() -> tuple[Any, Any]:
    return as_json("component", "list"), as_json("stack", "list")


def test_bad_components(prod: Path, tmp_path: Path) -> None:
    file = tmp_path / "a-file"
    file.write_text("x")
    before = snapshot()
    known_orchestrators = ", ".join(known_flavors(ComponentType.ORCHESTRATOR))
    cases = [
        (("x", "--type", "gpu", "--flavor", "local"), "Unknown component type 'gpu'"),
        (
            ("x", "--type", "orchestrator", "--flavor", "nope"),
            f"Unknown orchestrator flavor 'nope'; known: {known_orchestrators}.",
        ),
        (("orch", "--type", "orchestrator", "--flavor", "local"), "'orch' already exists"),
        (("x", "-t", "orchestrator", "-f", "local", "-c", "novalue"), "key=value"),
        (("x", "-t", "orchestrator", "-f", "local", "-c", "a=1", "-c", "a=2"), "more than once"),
        (("x", "-t", "artifact_store", "-f", "local", "-c", "path=42"), "directory path"),
        (("x", "-t", "artifact_store", "-f", "local", "-c", f"path={file}"), "not a directory"),
        # a typo is refused, as by local_process, not stored and ignored
        (("x", "-t", "orchestrator", "-f", "local", "-c", "bogus=1"), "Unknown local option"),
        (
            ("x", "-t", "artifact_store", "-f", "local", "-c", "pth=/tmp"),
            "Unknown local option 'pth' (did you mean 'path'?); known: path.",
        ),
    ]
    calls = [("component", "register", *args) for args, _ in cases]
    results = run_all(*calls, ("component", "list", "--type", "gpu"))
    fragments = [fragment for _, fragment in cases] + ["Unknown component type 'gpu'"]
    for result, fragment in zip(results, fragments, strict=True):
        assert_one_line_error(result, fragment)
    assert snapshot() == before


def test_bad_stacks(prod: Path, home: Path) -> None:
    config_before = (home / "config.json").read_bytes() if (home / "config.json").exists() else None
    before = snapshot()
    cases = [
        (("register", "x", "-o", "store", "-a", "store"), "is of type artifact_store, not orch"),
        (("register", "x", "-o", "orch", "-a", "orch"), "is of type orchestrator, not artifact"),
        (("register", "x", "-o", "orch", "-a", "store", "-s", "orch"), "not step_operator"),
        (("register", "x", "-o", "nope", "-a", "store"), "No orchestrator component named 'nope'"),
        (("register", "prod", "-o", "orch", "-a", "store"), "stack named 'prod' already exists"),
        (("set", "nope"), "No stack named 'nope'"),
        (("show", "nope"), "No stack named 'nope'"),
    ]
    results = run_all(*(("stack", *args) for args, _ in cases))
    for result, (_, fragment) in zip(results, cases, strict=True):
        assert_one_line_error(result, fragment)
    assert snapshot() == before
    after = (home / "config.json").read_bytes() if (home / "config.json").exists() else None
    assert after == config_before


def test_unknown_active_stack_from_env(prod: Path) -> None:
    env = {"WHARF_ACTIVE_STACK": "ghost"}
    assert_one_line_error(wharf("stack", "show", env=env), "No stack named 'ghost'")
    assert not any(s["active"] for s in as_json("stack", "list", env=env))


def test_delete_a_stack_then_its_components(prod: Path) -> None:
    in_use = wharf("component", "delete", "orch", "--type", "orchestrator", "--yes")
    assert_one_line_error(in_use, "Component 'orch' (orchestrator) is used by stack(s) prod")
    declined = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", "stack", "delete", "prod"],
        input="n\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert declined.returncode != 0
    assert "Delete stack 'prod'?" in declined.stdout
    assert "prod" in {s["name"] for s in as_json("stack", "list")}
    assert ok("stack", "delete", "prod", "-y") == "Deleted stack 'prod'.\n"
    assert "prod" not in {s["name"] for s in as_json("stack", "list")}
    confirmed = subprocess.run(
        [
            sys.executable,
            "-m",
            "wharf.cli.main",
            "component",
            "delete",
            "orch",
            "-t",
            "orchestrator",
        ],
        input="y\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert confirmed.returncode == 0, confirmed.stderr
    assert confirmed.stdout.endswith("Deleted orchestrator 'orch'.\n")
    ok("component", "delete", "store", "--type", "artifact-store", "--yes")
    names = {(c["type"], c["name"]) for c in as_json("component", "list")}
    assert names == {("orchestrator", "default"), ("artifact_store", "default")}


def test_a_run_shows_its_stack_and_once_the_stack_is_deleted_says_so(prod: Path) -> None:
    """Deleting a stack clears its id from its runs: ``runs show`` says the stack was deleted
    (on the quick path and the normal store alike) instead of naming none."""
    from wharf.sdk import stacks

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

    assert stack_line() == stack_line(normal) == "Stack     prod"
    assert stack_json() == stack_json(normal) == ("prod", False)
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
    ok("stack", "set", "prod")
    assert_one_line_error(
        wharf("stack", "delete", "prod", "-y"),
        "Stack 'prod' is the active stack; switch to another first: wharf stack set NAME.",
    )
    ok("stack", "set", "default")
    assert_one_line_error(
        wharf("stack", "delete", "prod", "-y", env={"WHARF_ACTIVE_STACK": "prod"}),
        "Stack 'prod' is the active stack; set WHARF_ACTIVE_STACK to another stack first.",
    )
    assert snapshot() == before


# ----------------------------------------------------------------------------- update


def _configuration(type: str, name: str) -> Any:
    listed = as_json("component", "list", "--type", type)
    return next(c["configuration"] for c in listed if c["name"] == name)


def test_update_a_component(prod: Path, home: Path, tmp_path: Path) -> None:
    from wharf.sdk import stacks

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
    assert _configuration("artifact_store", "remote") == {
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
    assert _configuration("orchestrator", "procs") == {}
    # validated like a new component: a local store's path is made absolute, and defaults
    out = ok("component", "update", "store", "-t", "artifact-store", "-c", "path=rel/new")
    assert out == f"Updated artifact_store component 'store': path={tmp_path / 'rel' / 'new'}.\n"
    ok("component", "update", "store", "-t", "artifact_store", "-r", "path")
    assert _configuration("artifact_store", "store") == {"path": str(home / "artifacts")}
    (described,) = [s for s in as_json("stack", "list") if s["name"] == "prod"]
    assert described["components"]["artifact_store"]["configuration"] == {
        "path": str(home / "artifacts")
    }


def test_bad_updates(prod: Path, tmp_path: Path) -> None:
    from wharf.sdk import stacks

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
    assert _configuration("artifact_store", "store") == {"path": str(moved)}
