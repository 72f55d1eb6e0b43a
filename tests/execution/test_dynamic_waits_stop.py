# ruff: noqa: F811  (the home fixture imported from stop_scripts)
"""``wharf runs stop RUN --force`` from another process while a dynamic pipeline's function,
called from a thread of the user's program (no signal wakes it), waits for a submitted step
that ignores its interrupt (``wharf.execution.dynamic_futures.settle``): real processes, a
pipeline script and the CLI. Every wait polls a condition with a deadline."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.execution.stop_scripts import (
    force_stop,
    home,  # noqa: F401 (fixture)
    script_started,
    the_run,
)
from tests.waiting import wait_until
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
            pass


@pipeline(dynamic=True)
def waits(go: str, how: str) -> None:
    if how == "map":
        block.map([go]).load()  # one step, block_0
        return
    submitted = block.submit(go=go)
    if how == "result":
        submitted.result()
    elif how == "returned":
        return  # the runner waits for the submitted step once the function returned
    elif how == "swallowed":
        try:
            submitted.wait()
        except BaseException as exc:
            Path(go + ".swallowed").write_text(type(exc).__name__)
        submitted.wait()  # the runner raises the forced stop again


def orchestrate() -> None:
    waits(go=sys.argv[1], how=sys.argv[2])
    print("the pipeline call returned", flush=True)


if __name__ == "__main__":
    thread = threading.Thread(target=orchestrate, name="not-main", daemon=True)
    thread.start()
    thread.join()
    os._exit(0)  # the stubborn step's thread would keep the interpreter from exiting
"""

PROMPT = 10.0
"""How soon (s) after the forced stop returned the pipeline call must have returned (about a
second, with room for a loaded machine)."""


@pytest.mark.parametrize("how", ["result", "map", "returned", "swallowed"])
def test_a_forced_stop_ends_a_wait_for_a_stuck_submitted_step_off_the_main_thread(
    home: Workspace, tmp_path: Path, how: str
) -> None:
    """The function waits for a stuck submitted step (``.result()``, a map's ``.load()``, the
    runner's own wait once the function returned, or again after swallowing the forced stop):
    the forced stop raises there within a short wait, so the pipeline call returns, the run
    force-stopped. Before, the run was ended by another thread, but the call never returned:
    the wait was one unbounded lock wait, which no signal wakes off the main thread."""
    go = tmp_path / "go"
    with script_started(tmp_path, SCRIPT, how) as process:
        run = the_run(home)
        assert run is not None
        force_stop(run)
        asked = time.monotonic()
        returned = wait_until(lambda: process.poll() is not None, PROMPT)
        took = time.monotonic() - asked
    out, err = (tmp_path / "out.txt").read_text(), (tmp_path / "err.txt").read_text()
    assert returned, f"the pipeline call had not returned {took:.1f} s after the forced stop"
    assert process.returncode == 0, err
    assert "the pipeline call returned" in out, err
    assert "Traceback" not in err, err
    ended = the_run(home)
    assert ended is not None
    assert (ended.status, ended.status_reason) == (
        ExecutionStatus.STOPPED,
        FORCE_STOPPED_ON_REQUEST,
    )
    steps = home.store.steps.list(StepRunFilter(run_id=ended.id), PageRequest()).items
    name = "block_0" if how == "map" else "block"
    assert [(s.name, s.status) for s in steps] == [(name, ExecutionStatus.STOPPED)], steps
    summaries = [line for line in err.splitlines() if "Run 'waits" in line and " in " in line]
    assert len(summaries) == 1, err
    assert summaries[0].endswith(": 1 stopped. Force-stopped on request."), err
    if how == "swallowed":
        assert Path(f"{go}.swallowed").read_text() == "ForcedStop"
