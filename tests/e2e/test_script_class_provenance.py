"""An artifact whose type is a class of the pipeline's script (``__main__:Color``) loads only
where that script runs: another script's ``__main__`` may define another class of that name,
which was used silently (an enum member of the same value, a named tuple's other fields).

Real processes: the pipeline script runs its steps in processes of their own (the script is
``__wharf_script__`` there), then loads the outputs itself; another script and the CLI are
refused, in one line saying where the class was defined and how to avoid it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error, wharf
from tests.e2e.test_isolated import make_stack
from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace

DEADLINE_SECONDS = 120

PIPELINE = """
import enum
from typing import NamedTuple

from wharf import Client, pipeline, step


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Point(NamedTuple):
    x: int
    y: int


@step(enable_cache=False)
def pick() -> Color:
    return Color.RED


@step(enable_cache=False)
def place() -> Point:
    return Point(1, 2)


@pipeline(name="provenance")
def colors() -> None:
    pick()
    place()


run = colors()
with Client() as client:
    print("SCRIPT", client.load_step_output(run.id, "pick") is Color.RED)
    print("SCRIPT", client.load_step_output(run.id, "place"))
"""

ANALYSE = """
import enum
import sys
from typing import NamedTuple

from wharf import Client
from wharf.core.errors import MaterializationError


class Color(enum.Enum):
    BLUE = 1
    RED = 2


class Point(NamedTuple):
    lat: int
    lon: int


with Client() as client:
    for name in ("provenance::pick::output", "provenance::place::output"):
        version = client.list_artifact_versions(name=name).items[0]
        try:
            print("LOADED", client.load_artifact(version))
        except MaterializationError as exc:
            print("REFUSED", exc)
"""


@pytest.fixture
def procs(wharf_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = Workspace.open(load_config())
    try:
        make_stack(workspace, "procs", "local_process")
    finally:
        workspace.close()
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    return wharf_home


def run_script(tmp_path: Path, name: str, source: str) -> str:
    script = tmp_path / name
    script.write_text(source)
    ran = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Warning" not in ran.stderr, ran.stderr
    return ran.stdout


def test_a_class_of_the_pipeline_script_loads_there_and_is_refused_elsewhere(
    procs: Path, tmp_path: Path
) -> None:
    made = run_script(tmp_path, "pipeline.py", PIPELINE)
    assert made.splitlines() == ["SCRIPT True", "SCRIPT Point(x=1, y=2)"]

    analysed = run_script(tmp_path, "analyse.py", ANALYSE).splitlines()
    assert "LOADED" not in "\n".join(analysed)  # was Color.BLUE and Point(lat=1, lon=2)
    assert analysed == [
        f"REFUSED Cannot load type '__wharf_script__:{name}@pipeline.py': {name} was defined "
        "in the __main__ of pipeline.py, the script that made the artifact, so only a process "
        f"running pipeline.py has it (this process runs analyse.py, which has a {name} of its "
        "own). Define the classes your steps return (and your materializers) in a module "
        "that your scripts import: artifacts saved after that load wherever it is imported."
        for name in ("Color", "Point")
    ]

    loaded = wharf("artifacts", "load", "provenance::pick::output")
    assert_one_line_error(loaded, "Color was defined in the __main__ of pipeline.py")
    assert "To read this version, run wharf.Client().load_artifact('" in loaded.stderr
    assert loaded.stderr.rstrip().endswith("') in pipeline.py.")
