"""Classes and materializers defined in the user's pipeline script, whichever process runs a
step: the script's own (inline steps, a dynamic pipeline's body) or a step's own process, which
executes the script as module ``__wharf_script__``.

Real processes: each script runs in a new interpreter (its ``__main__`` is the script), on a
``local_process`` stack (a static pipeline's steps each in a process of their own; a dynamic
pipeline's steps inline unless ``runtime="isolated"``) or on the default stack (inline)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from wharf import Client
from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace

DEADLINE_SECONDS = 120

DATACLASS_FROM_AN_ISOLATED_STEP = """
from dataclasses import dataclass

from wharf import pipeline, step


@dataclass
class Measure:
    value: int


@step(runtime="isolated")
def measure() -> Measure:
    return Measure(5)


@pipeline(name="script_classes", dynamic=True)
def measuring() -> None:
    loaded = measure().load()
    print("BODY", type(loaded).__qualname__, isinstance(loaded, Measure), loaded == Measure(5))


if __name__ == "__main__":
    measuring()
"""

CACHED_DATACLASS = """
from dataclasses import dataclass

from wharf import Client, pipeline, step


@dataclass
class Measure:
    value: int


@step
def measure() -> Measure:
    return Measure(5)


@step(enable_cache=False)
def check(measured: Measure) -> str:
    return f"{isinstance(measured, Measure)} {measured == Measure(5)}"


@pipeline(name="cached_script_classes")
def measuring() -> None:
    check(measure())


if __name__ == "__main__":
    run = measuring()
    with Client() as client:
        step = client.load_step_output(run.id, "check")
        loaded = client.load_step_output(run.id, "measure")
    print("STEP", step)
    print("SCRIPT", isinstance(loaded, Measure), loaded == Measure(5))
"""

SCRIPT_MATERIALIZER = """
import json
from typing import Any

from wharf import Client, pipeline, step
from wharf.artifacts.materializers.base import Materializer


class Point:
    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y


class PointMaterializer(Materializer):
    ASSOCIATED_TYPES = (Point,)

    def save(self, data: Any) -> None:
        self.write_bytes("point.json", json.dumps([data.x, data.y]).encode())

    def load(self, data_type: type) -> Any:
        return data_type(*json.loads(self.read_bytes("point.json")))


@step(output_materializers=PointMaterializer, enable_cache=False)
def make() -> Point:
    return Point(1, 2)


@step(enable_cache=False)
def use(point: Point) -> str:
    return f"{type(point).__qualname__} {point.x} {point.y}"


@pipeline(name="script_materializer")
def pointing() -> None:
    use(make())


if __name__ == "__main__":
    run = pointing()
    with Client() as client:
        used = client.load_step_output(run.id, "use")
        made = client.load_step_output(run.id, "make")
    print("USED", used)
    print("MADE", isinstance(made, Point), made.x, made.y)
"""


@pytest.fixture
def procs(wharf_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Wharf home whose active stack runs isolated steps in processes of their own."""
    workspace = Workspace.open(load_config())
    try:
        make_stack(workspace, "procs", "local_process")
    finally:
        workspace.close()
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    return wharf_home


def run_script(tmp_path: Path, name: str, source: str) -> str:
    """Run ``source`` as the script ``name`` in a new interpreter; its output."""
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
    return ran.stdout


def test_a_dataclass_made_by_an_isolated_step_loads_in_the_script_and_in_the_client(
    procs: Path, tmp_path: Path
) -> None:
    for _ in range(2):  # made by the step's process, then cached
        out = run_script(tmp_path, "measuring.py", DATACLASS_FROM_AN_ISOLATED_STEP)
        assert "BODY Measure True True" in out, out

    with Client(load_config()) as client:  # this process has no such script
        run = client.list_pipeline_runs().items[0]
        loaded = client.load_step_output(run.id, "measure")
    assert (type(loaded).__qualname__, loaded.value) == ("Measure", 5)


def test_a_cached_dataclass_is_an_instance_of_the_scripts_class(
    wharf_home: Path, tmp_path: Path
) -> None:
    for _ in range(2):  # inline steps in the script's process; then measure is cached
        out = run_script(tmp_path, "cached.py", CACHED_DATACLASS)
        assert "STEP True True" in out, out
        assert "SCRIPT True True" in out, out
    with Client(load_config()) as client:
        (last, _) = client.list_pipeline_runs().items
        statuses = {s.name: s.status.value for s in client.list_run_steps(last.id).items}
    assert statuses == {"measure": "cached", "check": "completed"}


def test_a_materializer_of_the_script_saves_and_loads_an_isolated_steps_output(
    procs: Path, tmp_path: Path
) -> None:
    out = run_script(tmp_path, "pointing.py", SCRIPT_MATERIALIZER)
    assert "USED Point 1 2" in out, out
    assert "MADE True 1 2" in out, out
