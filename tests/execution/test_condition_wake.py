# ruff: noqa: F811  (the home fixture imported from stop_scripts)
"""An interrupted step thread blocked in a ``threading.Condition`` wait (an ``Event``, a
``multiprocessing`` pool's ``map``) is woken from it and gets its interrupt at once; other
waiters of the same condition see nothing. Real threads; and a real pipeline script stopped with
one Ctrl-C sent to its process group, as a terminal does. Every wait polls with a deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.execution.stop_scripts import BOUND, home, script_started, the_run  # noqa: F401
from tests.waiting import wait_for, wait_until
from wharf.core.enums import ExecutionStatus
from wharf.execution.interrupt import InterruptibleRegion, StepInterrupted
from wharf.sdk.workspace import Workspace


def test_an_interrupt_wakes_a_thread_waiting_on_an_event_and_only_it() -> None:
    """Before, the interrupt waited for the event (here: forever)."""
    event = threading.Event()
    region = InterruptibleRegion()
    outcomes: list[str] = []

    def interrupted() -> None:
        try:
            with region:
                event.wait()
            outcomes.append("returned")
        except StepInterrupted:
            outcomes.append("interrupted")

    def bystander() -> None:
        outcomes.append(f"bystander {event.wait()}")

    threads = [threading.Thread(target=f, daemon=True) for f in (interrupted, bystander)]
    for thread in threads:
        thread.start()
    wait_for(lambda: len(event._cond._waiters) == 2, "both threads to wait", 10)  # type: ignore[attr-defined]
    assert region.interrupt("stop")
    threads[0].join(10)
    assert outcomes == ["interrupted"]
    assert threads[1].is_alive()  # the other waiter still waits
    event.set()
    threads[1].join(10)
    assert outcomes == ["interrupted", "bystander True"]


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
    time.sleep(60)
    return i


@step(enable_cache=False)
def pooled(method: str) -> int:
    with multiprocessing.get_context(method).Pool(4, initializer=hello) as pool:
        Path(f"{GO}.started").write_text(str(os.getpid()))
        return sum(pool.map(work, range(8), chunksize=1))


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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, /proc")
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_one_ctrl_c_stops_a_step_waiting_for_its_pools_map(
    home: Workspace, tmp_path: Path, method: str
) -> None:
    """The Ctrl-C also kills the pool's workers (they share the terminal), so their tasks are
    lost and ``map`` would never return: before, the step thread waited there, deaf to its
    interrupt, and the run stayed stopping until a second Ctrl-C. Now the step is interrupted at
    once, its ``with Pool`` ends the pool, and the run ends stopped, the process as interrupted."""
    with script_started(tmp_path, SCRIPT, method) as process:
        wait_for(lambda: len(workers(tmp_path)) >= 4, "the pool's workers", BOUND)
        os.killpg(process.pid, signal.SIGINT)
        try:
            code = process.wait(timeout=BOUND / 2)
        except subprocess.TimeoutExpired:
            err = (tmp_path / "err.txt").read_text()
            raise AssertionError(f"the run did not end:\n{err}") from None
    err = (tmp_path / "err.txt").read_text()
    assert code == -signal.SIGINT, err
    assert "Forcing the stop" not in err
    assert "Step 'pooled' stopped" in err, err
    run = the_run(home)
    assert run is not None and run.status is ExecutionStatus.STOPPED
    seen = workers(tmp_path)
    assert wait_until(lambda: not any(alive(pid) for pid in seen), 10), seen
