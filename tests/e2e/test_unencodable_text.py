"""A step that prints, or fails with, text that is not valid UTF-8 (a lone surrogate, as a
file name decoded with ``surrogateescape`` holds) keeps its output and its own error words, on
either local orchestrator: they are stored with the character written out (``\\udcff``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.test_caching import status_map
from wharf import Client, pipeline, step
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace


@step(enable_cache=False)
def prints_a_surrogate() -> int:
    sys.stdout.write("before \udcff after\n")  # as print() does where stdout escapes surrogates
    return 1


@step(enable_cache=False)
def fails_with_a_surrogate() -> int:
    raise ValueError("no file \udcff")


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str fails")


@step(enable_cache=False)
def fails_unprintably() -> int:
    raise UnprintableError


def test_an_inline_step_keeps_its_output_and_its_error_words(workspace: Workspace) -> None:
    @pipeline(raise_on_failure=False)
    def p() -> None:
        prints_a_surrogate()
        fails_with_a_surrogate()
        fails_unprintably()

    run = p.run_in(workspace)
    assert status_map(workspace, run.id) == {
        "prints_a_surrogate": ExecutionStatus.COMPLETED,
        "fails_with_a_surrogate": ExecutionStatus.FAILED,
        "fails_unprintably": ExecutionStatus.FAILED,
    }
    client = Client(workspace.config, workspace.store)
    assert client.step_logs("prints_a_surrogate", run=run.id) == "before \\udcff after\n"
    reasons = {s.name: s.status_reason for s in client.list_run_steps(run.id).items}
    assert reasons["fails_with_a_surrogate"] == "ValueError: no file \\udcff"
    assert reasons["fails_unprintably"] == "UnprintableError: <exception str() failed>"


SCRIPT = """
from wharf import pipeline, step

@step(enable_cache=False)
def fails_with_a_surrogate() -> int:
    raise ValueError("no file \\udcff")

@pipeline(raise_on_failure=False)
def isolated() -> None:
    fails_with_a_surrogate()

if __name__ == "__main__":
    isolated()
"""


def test_an_isolated_step_keeps_its_error_words(wharf_home: Path, tmp_path: Path) -> None:
    wharf = [sys.executable, "-m", "wharf.cli.main"]
    for command in (
        ["component", "register", "procs", "--type", "orchestrator", "--flavor", "local_process"],
        ["stack", "register", "procs", "-o", "procs", "-a", "default"],
        ["stack", "set", "procs"],
    ):
        subprocess.run([*wharf, *command], check=True, capture_output=True)
    (tmp_path / "isolated.py").write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, "isolated.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with Client() as client:
        run = client.list_pipeline_runs(size=1).items[0]
        (step_run,) = client.list_run_steps(run.id).items
    assert step_run.status is ExecutionStatus.FAILED
    assert step_run.status_reason == "ValueError: no file \\udcff"
