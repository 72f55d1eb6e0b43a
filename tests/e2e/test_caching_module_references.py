"""A script's helpers and constants are in its step's cache key: editing the helper the step
calls, or a constant it reads, runs the step again (it was reused with the old helper's
result); editing a function the step does not reach keeps it cached."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.test_caching import status_map
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, RunFilter

SCRIPT = """
from wharf import pipeline, step

THRESHOLD = 0.5


def preprocess(rows: int) -> list[float]:
    return [r * 1.0 for r in range(rows)]


def unrelated() -> int:
    return 1


@step
def count(rows: int = 5) -> int:
    return len([v for v in preprocess(rows) if v > THRESHOLD])


@pipeline
def counting() -> None:
    count()


if __name__ == "__main__":
    counting()
"""


def test_editing_what_the_step_reaches_runs_it_again(workspace: Workspace, tmp_path: Path) -> None:
    script = tmp_path / "counting.py"

    def run(text: str) -> ExecutionStatus:
        script.write_text(text)
        done = subprocess.run(
            [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        runs = workspace.store.runs.list(RunFilter(), PageRequest(size=100)).items
        newest = max(runs, key=lambda r: r.created)
        return status_map(workspace, newest.id)["count"]

    assert run(SCRIPT) is ExecutionStatus.COMPLETED
    assert run(SCRIPT) is ExecutionStatus.CACHED
    unrelated = SCRIPT.replace("return 1", "return 2")
    assert run(unrelated) is ExecutionStatus.CACHED
    helper = unrelated.replace("r * 1.0", "r * 2.0")
    assert run(helper) is ExecutionStatus.COMPLETED
    assert run(helper) is ExecutionStatus.CACHED
    constant = helper.replace("THRESHOLD = 0.5", "THRESHOLD = 2.5")
    assert run(constant) is ExecutionStatus.COMPLETED
    assert run(constant) is ExecutionStatus.CACHED
