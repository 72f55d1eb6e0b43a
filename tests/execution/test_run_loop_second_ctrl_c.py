# ruff: noqa: F811  (the home fixture imported from stop_scripts)
"""A second Ctrl-C swallowed by a dynamic pipeline's step code in the main thread (``except
BaseException``): the run loop tells the dynamic runner of it (``wharf.execution.run_loop``),
which raises the forced stop again at the step's end. Real processes: a pipeline script whose
step sends its own process the two Ctrl-Cs (SIGINT) a terminal would. Every wait polls a
condition with a deadline."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.execution.stop_scripts import home  # noqa: F401 (fixture)
from wharf.core.enums import ExecutionStatus
from wharf.core.transitions import FORCE_STOPPED_ON_REQUEST
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, RunFilter, StepRunFilter

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SCRIPT = """
import os
import signal
import sys
import time
from pathlib import Path

from wharf import pipeline, step

BOUND = 60.0


@step(enable_cache=False)
def stuck(go: str) -> int:
    Path(go + ".stuck").write_text("running")
    while True:  # stubborn: ignores its interrupt, never returns
        try:
            while True:
                time.sleep(0.02)
        except BaseException:
            pass


@step(enable_cache=False)
def swallows_two_ctrl_c(go: str) -> int:
    deadline = time.monotonic() + BOUND
    while not Path(go + ".stuck").exists() and sys.argv[2] == "with-stuck":
        assert time.monotonic() < deadline
        time.sleep(0.01)  # polls: the submitted step runs
    swallowed = []
    os.kill(os.getpid(), signal.SIGINT)  # the first Ctrl-C: a graceful stop
    while time.monotonic() < deadline and "ForcedStop" not in swallowed:
        try:
            if swallowed == ["StepInterrupted"]:
                os.kill(os.getpid(), signal.SIGINT)  # the second one: forced
            time.sleep(0.01)
        except BaseException as exc:  # the step's interrupt, then the forced stop
            swallowed.append(type(exc).__name__)
    Path(go + ".swallowed").write_text(" ".join(swallowed))
    return 1


@pipeline(dynamic=True)
def swallowing(go: str) -> None:
    submitted = stuck.submit(go=go) if sys.argv[2] == "with-stuck" else None
    swallows_two_ctrl_c(go=go)  # in this (the main) thread
    Path(go + ".went-on").write_text("the function went on after the forced stop")
    if submitted is not None:
        submitted.wait()


if __name__ == "__main__":
    swallowing(go=sys.argv[1])
    print("the pipeline call returned")
"""

BOUND = 60.0  # seconds: a hang fails the test instead of blocking it


@pytest.mark.parametrize("shape", ["alone", "with-stuck"])
def test_a_second_ctrl_c_swallowed_by_a_step_in_the_main_thread_forces_the_stop(
    home: Workspace, tmp_path: Path, shape: str
) -> None:
    """Before, the runner saw only a forced stop asked elsewhere (``stopped_waiting``), not a
    second Ctrl-C (``RunSignals.forced``): the function went on after the step, and the run
    ended 'Stopped on request.' (with a stuck submitted step, the function's wait for it never
    returned). Now the run ends force-stopped at the step's end, the process as interrupted."""
    (tmp_path / "script.py").write_text(SCRIPT)
    go = tmp_path / "go"
    process = subprocess.Popen(
        [sys.executable, "script.py", str(go), shape],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise AssertionError(f"the script did not end:\n{out}\n{err}") from None
    assert Path(f"{go}.swallowed").read_text() == "StepInterrupted ForcedStop", err
    assert not Path(f"{go}.went-on").exists(), err
    assert process.returncode == -signal.SIGINT, err
    assert "the pipeline call returned" not in out
    assert "Traceback" not in err, err
    (run,) = home.store.runs.list(RunFilter(), PageRequest()).items
    assert (run.status, run.status_reason) == (ExecutionStatus.STOPPED, FORCE_STOPPED_ON_REQUEST)
    steps = home.store.steps.list(StepRunFilter(run_id=run.id), PageRequest()).items
    assert {s.status for s in steps} <= {ExecutionStatus.STOPPED, ExecutionStatus.COMPLETED}
    if shape == "with-stuck":
        assert {s.name: s.status for s in steps}["stuck"] is ExecutionStatus.STOPPED, steps
    summaries = [line for line in err.splitlines() if "Run 'swallowing" in line and " in " in line]
    assert len(summaries) == 1, err
    assert summaries[0].endswith("Force-stopped on request."), err
