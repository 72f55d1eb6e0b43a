# ruff: noqa: F811  (the home fixture imported from stop_scripts)
"""A forced stop (``wharf runs stop --force``, or a second Ctrl-C) of an inline step whose code
is blocked and never returns: the step ends stopped and what it printed before is stored as its
log (``wharf.execution.log_capture.StepLog``), not lost with its thread. Real processes; every
wait polls a condition with a deadline."""

from __future__ import annotations

import signal
import sys
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
from wharf import Client
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

SCRIPT = """
import os
import sys
import time
from pathlib import Path

from wharf import pipeline, step


@step(enable_cache=False)
def block(go: str) -> int:
    print("printed before the block", flush=True)
    print("and on stderr", file=sys.stderr, flush=True)
    Path(go + ".started").write_text(str(os.getpid()))
    while True:  # stubborn: ignores its interrupt, never returns
        try:
            while True:
                time.sleep(0.02)
        except BaseException:
            Path(go + ".interrupted").write_text("yes")


@pipeline
def blocking(go: str) -> None:
    block(go=go)


if __name__ == "__main__":
    try:
        blocking(go=sys.argv[1])
    except BaseException as exc:
        print(f"the pipeline call raised {type(exc).__name__}", flush=True)
    os._exit(0)  # the stubborn step's thread would keep the interpreter from exiting
"""


@pytest.mark.parametrize("how", ["runs stop --force", "second Ctrl-C"])
def test_a_blocked_inline_step_ended_by_force_keeps_what_it_printed(
    home: Workspace, tmp_path: Path, how: str
) -> None:
    go = tmp_path / "go"
    with script_started(tmp_path, SCRIPT) as process:
        run = the_run(home)
        assert run is not None
        if how == "second Ctrl-C":
            process.send_signal(signal.SIGINT)
            interrupted = Path(f"{go}.interrupted")
            wait_for(interrupted.exists, "the graceful interrupt", BOUND)
            process.send_signal(signal.SIGINT)
        else:
            force_stop(run)
        process.wait(timeout=BOUND)
    ended = the_run(home)
    assert ended is not None and ended.status is ExecutionStatus.STOPPED
    client = Client(home.config, home.store)
    step = client.get_run_step(ended.id, "block")
    assert step.status is ExecutionStatus.STOPPED, step
    logs = client.step_logs(step)
    assert "printed before the block" in logs and "and on stderr" in logs, logs
