# ruff: noqa: F811  (the home fixture imported from stop_scripts)
"""``wharf runs stop RUN --force`` from another process, while the run is orchestrated off the
main thread of the user's program (``wharf.execution.run_stop``): real processes, a pipeline
script that calls the pipeline from a thread of its own, and the CLI. Every wait polls a
condition with a deadline."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.execution.stop_scripts import (
    BOUND,
    force_stop,
    home,  # noqa: F401 (fixture)
    script_started,
    the_run,
)
from tests.waiting import wait_for
from wharf.core.enums import ExecutionStatus
from wharf.core.transitions import FORCE_STOPPED_ON_REQUEST
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

SCRIPT = """
import os
import sys
import threading
import time
from pathlib import Path

from wharf import pipeline, step


@step(enable_cache=False)
def block(go: str) -> int:
    Path(go + ".started").write_text(str(os.getpid()))
    while True:  # stubborn: ignores its interrupt, never returns
        try:
            while True:
                time.sleep(0.02)
        except BaseException:
            Path(go + ".interrupted").write_text("yes")


@step(enable_cache=False)
def after(x: int) -> int:
    return x


@pipeline
def blocking(go: str) -> None:
    after(block(go=go))


@pipeline(dynamic=True)
def blocking_dynamic(go: str) -> None:
    after(block(go=go))  # block runs in this thread (the orchestrating one)


@pipeline(dynamic=True)
def blocking_submitted(go: str) -> None:
    block.submit(go=go).wait()  # this thread waits for a thread of the run's pool


def orchestrate() -> None:
    chosen = {"dynamic": blocking_dynamic, "submitted": blocking_submitted}.get(
        sys.argv[2], blocking
    )
    chosen(go=sys.argv[1])
    print("the pipeline call returned", flush=True)


if __name__ == "__main__":
    thread = threading.Thread(target=orchestrate, name="not-main", daemon=True)
    thread.start()
    thread.join()
    # A forced stop gives up on the stubborn step at once: its thread may not have run since its
    # interrupt was sent; it sees it before this process exits (bounded wait).
    deadline = time.monotonic() + 30
    while not Path(sys.argv[1] + ".interrupted").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os._exit(0)  # the stubborn step's thread would keep the interpreter from exiting
"""

PROMPT = 10.0
"""How soon (s) after the forced stop returned the run must have ended (about a second, with
room for a loaded machine)."""


def summary(err: str) -> str:
    """The run's summary line in the script's ``err`` ('' until it is shown)."""
    lines = [line for line in err.splitlines() if "Run 'blocking" in line and " in " in line]
    return lines[0] if lines else ""


@pytest.mark.parametrize("shape", ["static", "dynamic", "submitted"])
def test_a_forced_stop_from_elsewhere_ends_a_run_orchestrated_off_the_main_thread_at_once(
    home: Workspace, tmp_path: Path, shape: str
) -> None:
    """The pipeline runs in a thread of the user's program (no signal can wake it) and its
    inline step ignores its interrupt: the forced stop still ends the step and the run
    stopped within about a second, and the run says it was forced. A static pipeline's call
    returns at once; a dynamic one's function may be left where it is (swallowing the
    ``ForcedStop`` in the step's code), its run ended without it (waits for submitted steps
    return: ``test_dynamic_waits_stop``)."""
    go = tmp_path / "go"
    output, errors = tmp_path / "out.txt", tmp_path / "err.txt"
    with script_started(tmp_path, SCRIPT, shape) as process:
        run = the_run(home)
        assert run is not None
        force_stop(run)
        asked = time.monotonic()
        ended = wait_for(
            lambda: (r := the_run(home)) is not None and r.status.is_finished and r,
            "the run to end",
            BOUND,
        )
        took = time.monotonic() - asked
        if shape == "static":  # the pipeline call returns, and the script exits
            process.wait(timeout=BOUND)
        else:  # the run's summary line is shown once it ended (by another thread)
            wait_for(lambda: "stopped in" in summary(errors.read_text()), "the summary", BOUND)
        # The graceful interrupt came first, and was ignored. Not checked when the run ends: the
        # forced stop does not wait for the step's code to see it.
        interrupted = Path(f"{go}.interrupted")
        wait_for(interrupted.exists, "the step's code to see its interrupt", BOUND)
    out, err = output.read_text(), errors.read_text()
    assert took < PROMPT, f"the run ended {took:.1f} s after the forced stop"
    assert (ended.status, ended.status_reason) == (
        ExecutionStatus.STOPPED,
        FORCE_STOPPED_ON_REQUEST,
    )
    steps = home.store.steps.list(StepRunFilter(run_id=ended.id), PageRequest()).items
    assert [(s.name, s.status) for s in steps] == [("block", ExecutionStatus.STOPPED)], steps
    assert "Traceback" not in err, err
    summaries = [line for line in err.splitlines() if "Run 'blocking" in line and " in " in line]
    assert len(summaries) == 1, err  # shown once, whichever thread ended the run
    assert summary(err).endswith(": 1 stopped. Force-stopped on request."), err
    if shape == "static":
        assert process.returncode == 0, err
        assert "the pipeline call returned" in out, err
