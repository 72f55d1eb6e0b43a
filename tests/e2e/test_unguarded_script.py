"""A script that calls its pipeline at top level (no ``__main__`` guard), run as a real
process on the ``local_process`` stack: each step's process loads the script to find its step
and must not start the pipeline again; a step that cannot load fails at once with the reason."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack, steps
from wharf import Client
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest

SCRIPT = """
import os
from wharf import step, pipeline

@step(enable_cache=False)
def load(count: int) -> list[int]:
    {load_body}
    return list(range(count))

@step(enable_cache=False)
def train(data: list[int]) -> int:
    return os.getpid()

@pipeline
def training(count: int = 10):
    train(load(count))

run = training(count=100)
print("finished", run.status.value)  # uses the result: must not run in a step's process
"""

BOUND = 120  # seconds: a hang fails the test instead of blocking it


@pytest.fixture
def procs(wharf_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A fresh home whose active stack runs every step in its own process."""
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    ws = Workspace.open(load_config())
    make_stack(ws, "procs", "local_process")
    yield ws
    ws.close()


def run_script(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    """Run ``text`` as a script file in a real Python process (this test's environment)."""
    (tmp_path / "train.py").write_text(text)
    return subprocess.run(
        [sys.executable, "train.py"],
        check=False,
        capture_output=True,
        text=True,
        timeout=BOUND,
        env=dict(os.environ),
        cwd=tmp_path,
    )


def only_run(workspace: Workspace):  # type: ignore[no-untyped-def]
    runs = workspace.store.runs.list(page=PageRequest(size=100)).items
    assert len(runs) == 1, [(r.name, r.status, r.status_reason) for r in runs]
    return runs[0]


def test_one_run_and_the_steps_load(procs: Workspace, tmp_path: Path) -> None:
    done = run_script(tmp_path, SCRIPT.format(load_body="pass"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "finished completed"
    run = only_run(procs)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    found = steps(procs, run.id)
    assert {s.status for s in found.values()} == {ExecutionStatus.COMPLETED}
    client = Client(procs.config, procs.store)
    assert client.load_step_output(run.id, "train") == found["train"].pid  # its own process
    log = client.step_logs(found["load"].id)
    assert "Not running pipeline" not in log  # documented behaviour: no line in every step
    assert "finished" not in log


def test_a_raising_step_fails_fast_and_the_call_raises(procs: Workspace, tmp_path: Path) -> None:
    done = run_script(tmp_path, SCRIPT.format(load_body='raise ValueError("boom in load")'))
    assert done.returncode == 1
    assert "RunFailedError" in done.stderr and "boom in load" in done.stderr
    assert "finished" not in done.stdout
    run = only_run(procs)
    assert run.status is ExecutionStatus.FAILED
    load = steps(procs, run.id)["load"]
    assert load.status is ExecutionStatus.FAILED
    assert load.status_reason == "ValueError: boom in load"


def test_a_step_that_cannot_load_fails_at_once_with_the_reason(
    procs: Workspace, tmp_path: Path
) -> None:
    # Like a script that refuses to overwrite its output directory: it exits at top level when
    # the marker exists, which it creates just before calling the pipeline, so each step's
    # process (which executes the script again) exits before the steps are defined.
    script = SCRIPT.format(load_body="pass").replace(
        "run = training(count=100)", "MARKER.touch()\nrun = training(count=100)"
    )
    guard = (
        "import pathlib, sys\n"
        "MARKER = pathlib.Path('out.marker')\n"
        "if MARKER.exists():\n"
        "    sys.exit('out.marker exists: refusing to overwrite')\n"
    )
    done = run_script(tmp_path, guard + script)
    assert done.returncode == 1
    assert "RunFailedError" in done.stderr
    run = only_run(procs)
    assert run.status is ExecutionStatus.FAILED
    found = steps(procs, run.id)
    assert set(found) == {"load"}
    reason = found["load"].status_reason or ""
    assert reason.startswith("Cannot import step 'load': loading ")
    assert reason.endswith("raised SystemExit: out.marker exists: refusing to overwrite")
