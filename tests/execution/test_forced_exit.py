# ruff: noqa: F811  (the home fixture imported from stop_scripts)
"""A pipeline script whose inline step runs a ``multiprocessing`` pool, stopped with two
Ctrl-Cs (the second forces): the run is recorded stopped and the process exits at once as
interrupted, though the Ctrl-C killed pool workers holding the pool's queue lock (on which
``multiprocessing``'s exit cleanup would wait forever), and no worker is left. Real processes
and signals, sent to the script's process group as a terminal does; every wait polls."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.execution.stop_scripts import BOUND, home, script_started, the_run  # noqa: F401
from tests.waiting import wait_for, wait_until
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, /proc")

SCRIPT = """
import multiprocessing
import os
import sys
import time
from pathlib import Path

from wharf import pipeline, step

GO = sys.argv[1]


def hello() -> None:
    Path(f"{GO}.w{os.getpid()}").write_text(str(os.getpid()))


def work(i: int) -> int:
    if sys.argv[3] == "holding" and i == 0:  # dies holding the lock, as a Ctrl-C may make it
        frame = sys._getframe()
        while "inqueue" not in frame.f_locals:  # multiprocessing.pool.worker's
            frame = frame.f_back
        frame.f_locals["inqueue"]._rlock.acquire()
        Path(f"{GO}.holding").write_text("yes")
        time.sleep(600)
    time.sleep(0.002)
    return i


@step(enable_cache=False)
def pooled(method: str) -> int:
    with multiprocessing.get_context(method).Pool(4, initializer=hello) as pool:
        Path(f"{GO}.started").write_text(str(os.getpid()))
        return sum(pool.map(work, range(1_000_000), chunksize=1))


@pipeline
def with_pool(method: str) -> None:
    pooled(method)


if __name__ == "__main__":
    with_pool(method=sys.argv[2])
    print("the pipeline call returned")
"""


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def workers(tmp_path: Path) -> list[int]:
    return [int(path.read_text()) for path in tmp_path.glob("go.w*") if path.read_text()]


@pytest.mark.parametrize(
    ("method", "mode"),
    [("fork", "busy"), ("fork", "holding"), ("spawn", "holding"), ("forkserver", "holding")],
)
def test_a_forced_stop_exits_though_pool_workers_died_holding_its_lock(
    home: Workspace, tmp_path: Path, method: str, mode: str
) -> None:
    """``busy``: workers take short tasks off the queue all the time, so the Ctrl-Cs often
    kill one holding its lock; ``holding``: one worker always dies holding it."""
    with script_started(tmp_path, SCRIPT, method, mode) as process:
        ready = tmp_path / "go.holding" if mode == "holding" else None
        wait_for(
            lambda: (ready is None or ready.exists()) and len(workers(tmp_path)) >= 4,
            "the pool's workers",
            BOUND,
        )
        err = tmp_path / "err.txt"
        os.killpg(process.pid, signal.SIGINT)
        wait_for(lambda: "Stopping run" in err.read_text(), "the graceful stop", BOUND)
        os.killpg(process.pid, signal.SIGINT)
        try:
            code = process.wait(timeout=BOUND / 2)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the script hung at exit:\n{err.read_text()}") from None
    assert code == -signal.SIGINT, err.read_text()
    assert "Forcing the stop" in err.read_text()
    assert "the pipeline call returned" not in (tmp_path / "out.txt").read_text()
    run = the_run(home)
    assert run is not None and run.status is ExecutionStatus.STOPPED
    seen = workers(tmp_path)
    assert wait_until(lambda: not any(alive(pid) for pid in seen), 10), seen
