# ruff: noqa: F811  (fixtures imported from the RM API conftest)
"""``wharf resource``: custom resources registered from the command line, against a real RM
server and the embedded RM, up to a pipeline whose step waits for one. Bad input: one line on
stderr, exit 1, nothing changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import env, ok, rm, run  # noqa: F401 (fixtures)
from tests.resource_manager.api.conftest import (  # noqa: F401 (fixtures)
    _rm_sqlite_template,
    server,
    sqlite_rm_url,
)
from tests.resource_manager.api.live import ALICE_KEY
from wharf.resource_manager.client.http import HttpResourceManager


def test_a_pool_of_a_custom_resource_from_the_command_line(
    env: dict[str, str], rm: HttpResourceManager
) -> None:
    """The QA pass's finding: ``pool create lic -c license=1`` had no resource to name, and no
    command made one."""
    refused = run("pool", "create", "lic", "-c", "license=1", env=env)
    assert_one_line_error(refused, "`wharf resource create license` registers it.")
    created = json.loads(ok("resource", "create", "license", "-o", "json", env=env))
    assert created["units"] == [{"name": "license", "multiplier": 1}]
    assert created["default_unit"] == "license" and created["kind"] == "license"
    ok("pool", "create", "lic", "-c", "license=3", env=env)
    assert rm.pools.get("lic").classes[0].capacity == {"license": 3}
    table = ok("resource", "list", env=env)
    names = [line.split()[0] for line in table.splitlines()[1:] if line.strip()]
    assert names[:3] == ["CPU", "GPU", "memory"] and "license" in names  # built-in ones first
    assert "license=1" in ok("resource", "show", "license", env=env)

    in_use = run("resource", "delete", "license", "--yes", env=env)
    assert_one_line_error(in_use, "still offered by pools: lic")
    ok("pool", "delete", "lic", "--yes", env=env)
    assert ok("resource", "delete", "license", "--yes", env=env) == "Deleted resource 'license'.\n"
    assert "license" not in {d.name for d in rm.descriptors.list()}


def test_units_of_its_own(env: dict[str, str], rm: HttpResourceManager) -> None:
    """``--unit`` gives a resource units, so a pool's capacity and a demand may use any of
    them; a bare number means the default unit."""
    ok(
        "resource",
        "create",
        "tpu",
        "--unit",
        "core=1",
        "--unit",
        "chip=8",
        "--default-unit",
        "chip",
        "--description",
        "TPU cores; a chip holds 8",
        env=env,
    )
    ok("pool", "create", "tpus", "-c", "tpu=2", "-c", "tpu:v5=12core", env=env)
    classes = {c.name: c.capacity for c in rm.pools.get("tpus").classes}
    assert classes == {"default": {"tpu": 16}, "v5": {"tpu": 12}}
    shown = json.loads(ok("resource", "show", "tpu", "-o", "json", env=env))
    assert shown["description"] == "TPU cores; a chip holds 8"


BAD_INPUT: list[tuple[tuple[str, ...], str]] = [
    (("resource", "create", "cpu"), "clashes with the built-in cpu kind"),
    (("resource", "create", "Gpu"), "clashes with the built-in gpu kind"),
    # a demand of one CPU was met with one of it (the QA pass's 'mycpu')
    (("resource", "create", "mycpu", "--kind", "cpu"), "Kind 'cpu' of 'mycpu' clashes"),
    (("resource", "create", "vram", "--kind", "Memory"), "Kind 'Memory' of 'vram' clashes"),
    (("resource", "create", "x", "--unit", "a=two"), "'two' is not a whole number"),
    (("resource", "create", "x", "--unit", "a"), "Expected UNIT=MULTIPLIER"),
    (("resource", "create", "x", "--unit", "a=2"), "exactly one base unit"),
    (("resource", "create", "x", "--default-unit", "y"), "Default unit 'y' is not one"),
    (("resource", "create", "bad name"), "Invalid resource name 'bad name': it must start"),
    (("resource", "create", ""), "Invalid resource name '': it must start with a letter"),
    (("resource", "create", "license"), "already exists"),
    (("resource", "create", "License"), "differs from the existing resource 'license' only in"),
    (("resource", "create", "x", "--unit", "core-hour=1"), "Unit 'core-hour' of resource 'x'"),
    (("resource", "show", "nope"), "nope"),
    (("resource", "delete", "nope", "--yes"), "nope"),
    (("resource", "delete", "CPU", "--yes"), "CPU"),
]


def test_bad_input_is_one_line_and_changes_nothing(
    env: dict[str, str], rm: HttpResourceManager
) -> None:
    ok("resource", "create", "license", env=env)
    before = rm.descriptors.list()
    for args, fragment in BAD_INPUT:
        assert_one_line_error(run(*args, env=env), fragment)
    assert rm.descriptors.list() == before


def test_only_an_administrator_registers_resources(
    env: dict[str, str], rm: HttpResourceManager
) -> None:
    alice = {**env, "WHARF_RM_API_KEY": ALICE_KEY}
    assert_one_line_error(run("resource", "create", "x", env=alice), "Only an administrator")
    assert "CPU" in ok("resource", "list", env=alice)
    assert "x" not in {d.name for d in rm.descriptors.list()}


PIPELINE = """
from wharf import ResourceSettings, pipeline, step


@step(enable_cache=False, settings={"resources": ResourceSettings(resources={"license": 1})})
def licensed() -> str:
    from wharf import get_step_context

    allocation = get_step_context().allocation
    return allocation.allocations[0].resource


@pipeline(dynamic=True)
def uses_a_license() -> None:
    print("held", licensed().load())


if __name__ == "__main__":
    uses_a_license()
"""


def test_embedded_a_step_waits_for_a_resource_registered_by_the_cli(tmp_path: Path) -> None:
    """Embedded mode, a new user's path: register the resource, offer it in a pool, admit
    everyone, and a step asking for it runs with it allocated from that pool."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WHARF_RM_", "WHARF_STORE"))}
    env["WHARF_HOME"] = str(tmp_path / "home")
    ok("resource", "create", "license", env=env)
    ok("pool", "create", "licenses", "-c", "license=1", env=env)
    ok(
        "policy",
        "create",
        "licenses-all",
        "--pool",
        "licenses",
        "--subject-type",
        "account",
        env=env,
    )
    script = tmp_path / "licensed.py"
    script.write_text(PIPELINE)
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "held license" in result.stdout.splitlines()
    requests = json.loads(ok("request", "list", "-o", "json", env=env))
    assert [r["status"] for r in requests] == ["released"]
