"""A step that prints, or fails with, text that is not valid UTF-8 (a lone surrogate, as a
file name decoded with ``surrogateescape`` holds) keeps its output and its own error words, on
either local orchestrator: they are stored with the character written out (``\\udcff``)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from wharf import Client
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunRecord

SCRIPT = """
import sys

from wharf import pipeline, step


@step(enable_cache=False)
def prints_a_surrogate() -> int:
    sys.stdout.write("before \\udcff after\\n")  # as print() does where stdout escapes them
    return 1


@step(enable_cache=False)
def fails_with_a_surrogate() -> int:
    raise ValueError("no file \\udcff")


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str fails")


@step(enable_cache=False)
def fails_unprintably() -> int:
    raise UnprintableError


@pipeline(raise_on_failure=False)
def unencodable() -> None:
    prints_a_surrogate()
    fails_with_a_surrogate()
    fails_unprintably()


if __name__ == "__main__":
    sys.stdout.reconfigure(errors="surrogateescape")
    sys.stderr.reconfigure(errors="backslashreplace")
    unencodable()
"""


def run_script(tmp_path: Path) -> dict[str, StepRunRecord]:
    """Run the script (in a process of its own: its output holds what pytest's workers cannot
    send) and return its run's step runs by name."""
    (tmp_path / "unencodable.py").write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, "unencodable.py"],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="backslashreplace")
    with Client() as client:
        run = client.list_pipeline_runs(size=1).items[0]
        return {s.name: s for s in client.list_run_steps(run.id).items}


def test_an_inline_step_keeps_its_output_and_its_error_words(
    wharf_home: Path, tmp_path: Path
) -> None:
    steps = run_script(tmp_path)

    assert {name: s.status for name, s in steps.items()} == {
        "prints_a_surrogate": ExecutionStatus.COMPLETED,
        "fails_with_a_surrogate": ExecutionStatus.FAILED,
        "fails_unprintably": ExecutionStatus.FAILED,
    }
    with Client() as client:
        log = client.step_logs(steps["prints_a_surrogate"].id)
    assert log == "before \\udcff after\n"
    assert steps["fails_with_a_surrogate"].status_reason == "ValueError: no file \\udcff"
    assert steps["fails_unprintably"].status_reason == (
        "UnprintableError: <exception str() failed>"
    )


def test_an_isolated_step_keeps_its_error_words(
    wharf_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    with contextlib.closing(Workspace.open(load_config())) as workspace:
        make_stack(workspace, "procs", "local_process")

    steps = run_script(tmp_path)

    assert steps["fails_with_a_surrogate"].status is ExecutionStatus.FAILED
    assert steps["fails_with_a_surrogate"].status_reason == "ValueError: no file \\udcff"
    assert steps["fails_unprintably"].status_reason == (
        "UnprintableError: <exception str() failed>"
    )
