"""What a ``wharf`` process imports to start: every process pays for its imports in CPU (the
test suite starts hundreds), so a command must not import what it does not use. Each test runs
``wharf`` commands in one fresh interpreter (``wharf.cli.main.main(argv)``, as the entry point
runs it) and checks which modules were loaded after each command: they accumulate, so the
commands run from the lightest to the heaviest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wharf.cli.main import COMMANDS

RUN = """
import json
import sys

from wharf.cli.main import main

loaded = []
for argv in json.loads(sys.argv[1]):
    try:
        main(argv)
    except SystemExit:
        pass
    loaded.append(sorted(sys.modules))
print(json.dumps(loaded))
"""

HEAVY = ("sqlalchemy", "httpx", "pydantic", "rich", "wharf.store", "wharf.sdk", "wharf.server")


def loaded_after(home: Path, *commands: list[str]) -> list[set[str]]:
    """The modules loaded in one fresh ``wharf`` process after each of ``commands``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(commands)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [set(names) for names in json.loads(done.stdout.splitlines()[-1])]


def heavy(modules: set[str]) -> list[str]:
    return sorted(h for h in HEAVY if any(m == h or m.startswith(f"{h}.") for m in modules))


def test_help_imports_no_model_store_or_http_client(tmp_path: Path) -> None:
    helps = [["--help"], *([name, "--help"] for name in sorted(COMMANDS))]
    after = loaded_after(tmp_path / "home", *helps)
    found = {" ".join(argv): heavy(modules) for argv, modules in zip(helps, after, strict=True)}
    assert {command: names for command, names in found.items() if names} == {}


@pytest.mark.usefixtures("logs_workspace")
def test_logout_and_an_error_import_no_http_client(tmp_path: Path) -> None:
    """Not logged in, ``logout`` has nothing to revoke; an error on the embedded store has no
    server's refusal to word: neither imports the REST store (and httpx)."""
    after = loaded_after(tmp_path / "home", ["logout"], ["runs", "show", "no-such-run"])
    assert "httpx" not in after[0]
    assert "wharf.cli.runs" in after[1]
    assert not {"httpx", "wharf.store.rest"} & after[1]


def test_pool_list_on_the_embedded_rm_imports_no_store_records(tmp_path: Path) -> None:
    """The embedded Resource Manager needs the store's default user's name, not its records."""
    (after,) = loaded_after(tmp_path / "home", ["pool", "list"])
    assert "wharf.resource_manager.embedded.connect" in after  # it did list the pools
    assert not {"wharf.store.models", "wharf.config.spec", "httpx"} & after


@pytest.mark.usefixtures("logs_workspace")
def test_runs_list_with_no_live_run_looks_for_no_process(tmp_path: Path) -> None:
    """The quick path asks whether a live run's orchestrating process is gone; with no live run
    there is no process to look for, nor its module (which imports subprocess) to import."""
    (after,) = loaded_after(tmp_path / "home", ["runs", "list"])
    assert "wharf.cli.quick_reads" in after
    assert not {"wharf.store.process_identity", "sqlalchemy", "httpx"} & after
