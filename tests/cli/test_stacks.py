# ruff: noqa: F811  (the home and prod fixtures are imported from stacks_cli)
"""``wharf component register/list`` and ``wharf stack register/list/show/set``, and the bad
input they refuse, run as real subprocesses against a real store (deletion and update:
``test_stacks_changes.py``)."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from tests.cli.stacks_cli import (  # noqa: F401 (fixtures)
    as_json,
    assert_one_line_error,
    home,
    ok,
    open_workspace,
    prod,
    run_all,
    snapshot,
    wharf,
)
from tests.config.flavor_dist import TINY_MODULE, tiny_distribution
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType
from wharf.sdk.flavors import known_flavors
from wharf.sdk.workspace import Workspace


def test_help_lists_the_groups() -> None:
    out = ok("--help")
    assert "stack" in out and "component" in out
    assert "register" in ok("stack", "--help") and "register" in ok("component", "--help")


def test_register_and_list_components(home: Path, tmp_path: Path) -> None:
    register = ("component", "register")
    local, remote, plain = run_all(
        (*register, "store", "--type", "artifact-store", "--flavor", "local", "-c", "path=rel/dir"),
        # values are JSON, else text; fsspec passes every other key to its backend
        (
            *register,
            *("remote", "-t", "artifact_store", "-f", "fsspec", "-c", "path=s3://bucket/arts"),
            *("-c", "anon=true", "-c", 'profile="7"', "-c", "default_block_size=3"),
        ),
        (*register, "plain", "-t", "artifact_store", "-f", "local"),  # path: the artifact root
    )
    assert "Registered artifact_store 'store'" in local.stdout, local.stderr
    assert "Registered artifact_store 'remote'" in remote.stdout, remote.stderr
    assert plain.returncode == 0, plain.stderr
    components = as_json("component", "list")
    assert {(c["name"], c["type"]) for c in components} == {
        ("store", "artifact_store"),
        ("remote", "artifact_store"),
        ("plain", "artifact_store"),
        ("default", "artifact_store"),  # the default stack's components exist from first use
        ("default", "orchestrator"),
    }
    stores = {c["name"]: c for c in components if c["type"] == "artifact_store"}
    assert stores["store"]["configuration"] == {
        "path": str(home.parent / "rel" / "dir"),  # resolved against the caller's directory
    }
    assert stores["remote"]["configuration"] == {
        "path": "s3://bucket/arts",
        "anon": True,
        "profile": "7",
        "default_block_size": 3,
    }
    assert stores["plain"]["configuration"] == {"path": str(home / "artifacts")}
    assert [c["name"] for c in as_json("component", "list", "-t", "orchestrator")] == ["default"]
    table = ok("component", "list")
    assert "store" in table and '"default_block_size": 3' in table and "artifact_store" in table


def test_register_a_stack_with_a_step_operator(home: Path, tmp_path: Path) -> None:
    """Without one: ``test_a_third_party_flavor_is_listed_registered_and_runs``."""
    assert "local_process" in known_flavors(ComponentType.STEP_OPERATOR)
    path = tmp_path / "arts"
    register = ("component", "register")
    for result in run_all(
        (*register, "orch", "--type", "orchestrator", "--flavor", "local"),
        (*register, "store", "-t", "artifact_store", "-f", "local", "-c", f"path={path}"),
        (*register, "op", "-t", "step-operator", "-f", "local_process"),
    ):
        assert result.returncode == 0, result.stderr
    out = ok(
        *("stack", "register", "gpu", "--orchestrator", "orch", "--artifact-store", "store"),
        *("--step-operator", "op"),
    )
    assert "Registered stack 'gpu'" in out
    shown = as_json("stack", "show", "gpu")
    assert shown["components"]["artifact_store"]["configuration"] == {"path": str(path)}
    assert shown["components"]["step_operator"]["flavor"] == "local_process"


def test_the_command_a_message_suggests_runs_as_printed(home: Path) -> None:
    """It printed ``wharf stack set with space``, which a shell reads as two names."""
    out = ok("stack", "register", "with space", "-o", "default", "-a", "default")
    suggested = out.strip().split("use it with: ", 1)[1]
    assert suggested == "wharf stack set 'with space'"
    assert "Active stack: 'with space'" in ok(*shlex.split(suggested)[1:])


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
    # ``stack show`` without a name: test_set_stack_is_used_by_pipeline_runs_unless_env_overrides


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


def test_set_stack_is_used_by_pipeline_runs_unless_env_overrides(prod: Path, home: Path) -> None:
    override = {"WHARF_ACTIVE_STACK": "default"}
    result = wharf("stack", "set", "prod", env=override)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Active stack: 'prod'.\n"
    assert "WHARF_ACTIVE_STACK=default overrides" in result.stderr
    assert json.loads((home / "config.json").read_text())["active_stack"] == "prod"
    listed, shown, listed_env, shown_env = run_all(
        ("stack", "list", "-o", "json"), ("stack", "show", "-o", "json")
    ) + [wharf("stack", command, "-o", "json", env=override) for command in ("list", "show")]
    assert [s["name"] for s in json.loads(listed.stdout) if s["active"]] == ["prod"]
    assert json.loads(shown.stdout)["name"] == "prod"  # the active stack by default
    assert [s["name"] for s in json.loads(listed_env.stdout) if s["active"]] == ["default"]
    assert json.loads(shown_env.stdout)["name"] == "default"

    from tests.e2e import steps_lib
    from wharf import pipeline

    @pipeline(name="stack_pipeline")
    def p() -> None:
        steps_lib.double(steps_lib.produce())

    with open_workspace() as workspace:
        stack = workspace.active_stack()
        assert stack.name == "prod"
        store = workspace.component_instance(stack, ComponentType.ARTIFACT_STORE)
        assert store.path == str(prod)
        run = p.run_in(workspace)
        assert run.status.value == "completed"
        assert workspace.store.snapshots.get(run.snapshot_id).stack_id == stack.id
        versions = workspace.store.artifacts.list_versions().items
    assert len(versions) == 2
    assert all(v.uri.startswith(str(prod) + os.sep) for v in versions)


def test_set_default_on_a_fresh_home(home: Path) -> None:
    ok("stack", "set", "default")
    assert json.loads((home / "config.json").read_text()) == {"active_stack": "default"}


# ----------------------------------------------------------------------------- bad input


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
