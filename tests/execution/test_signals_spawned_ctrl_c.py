# ruff: noqa: F811  (the home fixture imported from stop_scripts)
"""Ctrl-C at the terminal while an inline step waits for a ``spawn`` or ``forkserver`` pool:
its workers are exec'd interpreters, which the at-fork hook that makes a forked worker ignore
the run's graceful Ctrl-C never reaches; they are handed the run's signals as they start. Real
pipeline scripts in a process group of their own, signalled as a terminal does; a worker alone
is signalled where what it makes of its next Ctrl-C must be seen before the run's forced stop
kills it. Every wait polls a marker file a worker, the step or the script writes."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from tests.execution.stop_scripts import BOUND, home, script_started  # noqa: F401
from tests.execution.test_signals_forked_ctrl_c import (
    alive,
    ended,
    marked,
    step_status,
    stop_recorded,
)
from tests.waiting import wait_for, wait_until
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forkserver, /proc")

TASKS = 4
METHODS = ["spawn", "forkserver"]

SCRIPT = """
import multiprocessing
import os
import sys
import time
from pathlib import Path

from wharf import pipeline, step
from wharf.execution.worker_sigint import holding


def counted() -> int:  # the run's signals and the Ctrl-Cs this worker has counted
    holder = holding()
    return len(holder.received) if holder is not None else -1


def task(go: str, i: int) -> int:
    Path(f"{go}.t{i}").write_text(str(os.getpid()))
    told = None
    try:
        while not (os.path.exists(f"{go}.gate") or os.path.exists(f"{go}.gate{i}")):
            if counted() != told:  # tells the test that a signal was taken, not only sent
                told = counted()
                Path(f"{go}.n{i}").write_text(str(told))
            time.sleep(0.01)  # the work: until the test opens its gate
    except KeyboardInterrupt:
        Path(f"{go}.k{i}").write_text(str(os.getpid()))
        raise
    Path(f"{go}.d{i}").write_text(str(os.getpid()))
    return i


@step(enable_cache=False)
def pooled(go: str, method: str) -> int:
    context = multiprocessing.get_context(method)
    with context.Pool(2, maxtasksperchild=1) as pool:  # a new worker for each task
        Path(f"{go}.started").write_text(str(os.getpid()))
        total = sum(pool.starmap(task, [(go, i) for i in range(TASKS)], chunksize=1))
    Path(f"{go}.mapped").write_text(str(total))
    return total


@step(enable_cache=False)
def nothing() -> None:
    pass


@pipeline
def with_pool(go: str, method: str) -> None:
    pooled(go=go, method=method)


@pipeline
def empty() -> None:
    nothing()


if __name__ == "__main__":
    go, method = sys.argv[1], sys.argv[2]
    if sys.argv[3:] == ["outside"]:
        empty()  # the run is over: the worker started next is none of its
        worker = multiprocessing.get_context(method).Process(target=task, args=(go, 0))
        worker.start()
        Path(f"{go}.started").touch()
        worker.join()
        print("EXIT", worker.exitcode, flush=True)
    else:
        with_pool(go=go, method=method)
        print("the pipeline call returned")
""".replace("TASKS", str(TASKS))


def running(tmp_path: Path, count: int, besides: dict[str, int]) -> dict[str, int] | None:
    """``count`` tasks started (marker name -> the worker's pid) besides those of ``besides``;
    None before."""
    found = {name: pid for name, pid in marked(tmp_path, "t").items() if name not in besides}
    return found if len(found) >= count else None


def index(name: str) -> str:
    """The task index in a marker's name (``go.t3`` -> ``3``)."""
    return name.removeprefix("go.t")


@pytest.mark.parametrize("method", METHODS)
def test_one_ctrl_c_lets_a_steps_pool_finish_its_map(
    home: Workspace, tmp_path: Path, method: str
) -> None:
    """Before, the Ctrl-C raised ``KeyboardInterrupt`` in the pool's workers: their tasks were
    lost and ``map`` never returned, the run stopping until a second Ctrl-C. Now the workers
    ignore it and the tasks finish (those of workers started after it too); the step gets its
    interrupt as its ``map`` returns, the run ends stopped, no worker left."""
    err = tmp_path / "err.txt"
    with script_started(tmp_path, SCRIPT, method) as process:
        wait_for(lambda: running(tmp_path, 2, {}), "the pool's first tasks", BOUND)
        os.killpg(process.pid, signal.SIGINT)
        wait_for(lambda: stop_recorded(home), "the graceful stop", BOUND)
        (tmp_path / "go.gate").write_text("open")
        code = ended(process, err)
    assert code == -signal.SIGINT, err.read_text()
    assert len(marked(tmp_path, "d")) == TASKS, err.read_text()  # no task was lost
    assert not marked(tmp_path, "k"), err.read_text()
    for word in ("KeyboardInterrupt", "Traceback", "Forcing the stop"):
        assert word not in err.read_text(), err.read_text()
    assert "the pipeline call returned" not in (tmp_path / "out.txt").read_text()
    assert step_status(home) is ExecutionStatus.STOPPED
    seen = set(marked(tmp_path, "t").values())
    assert wait_until(lambda: not any(alive(pid) for pid in seen), 10), seen


@pytest.mark.parametrize("method", METHODS)
def test_the_ctrl_c_that_forces_the_stop_interrupts_the_workers(
    home: Workspace, tmp_path: Path, method: str
) -> None:
    """After the run's first Ctrl-C, a worker's next one does what SIGINT did before the run
    (``KeyboardInterrupt``), also in a worker started after it (the pool replaces each worker
    after its task), which counts it: its first Ctrl-C is the one that forces. Each such
    Ctrl-C goes to one worker (the run's forced stop would kill them all before they could show
    it); the last one, to the group, forces the stop: the script exits, no worker left."""
    err = tmp_path / "err.txt"
    with script_started(tmp_path, SCRIPT, method) as process:
        first = wait_for(lambda: running(tmp_path, 2, {}), "the pool's first tasks", BOUND)
        os.killpg(process.pid, signal.SIGINT)
        wait_for(lambda: "Stopping run" in err.read_text(), "the graceful stop", BOUND)
        interrupted, finishing = sorted(first)
        # Two Ctrl-Cs that reach a process before it runs its handler are handled as one.
        counts = tmp_path / f"go.n{index(interrupted)}"
        wait_for(lambda: counts.exists() and counts.read_text() == "1", "the worker's count", BOUND)
        os.kill(first[interrupted], signal.SIGINT)
        stopped = tmp_path / f"go.k{index(interrupted)}"
        wait_for(stopped.exists, "the worker's KeyboardInterrupt", BOUND)
        (tmp_path / f"go.gate{index(finishing)}").write_text("open")
        finished = tmp_path / f"go.d{index(finishing)}"
        wait_for(finished.exists, "the other worker's task, despite the Ctrl-C", BOUND)
        later = wait_for(lambda: running(tmp_path, 2, first), "the new workers' tasks", BOUND)
        assert not set(later.values()) & set(first.values()), (first, later)
        for name, pid in later.items():
            os.kill(pid, signal.SIGINT)
            mark = tmp_path / f"go.k{index(name)}"
            wait_for(
                mark.exists, f"the KeyboardInterrupt of a worker started later ({name})", BOUND
            )
        os.killpg(process.pid, signal.SIGINT)
        code = ended(process, err)
    assert code == -signal.SIGINT, err.read_text()
    assert "Forcing the stop" in err.read_text()
    assert len(marked(tmp_path, "d")) == 1, err.read_text()
    assert step_status(home) is ExecutionStatus.STOPPED
    seen = set(marked(tmp_path, "t").values())
    assert wait_until(lambda: not any(alive(pid) for pid in seen), 10), seen


@pytest.mark.parametrize("method", METHODS)
def test_a_worker_started_outside_a_run_keeps_pythons_default(
    home: Workspace, tmp_path: Path, method: str
) -> None:
    """After a run (which set the hand-over to spawned workers up in the script's process), a
    worker the script starts is left alone: its first Ctrl-C raises ``KeyboardInterrupt``."""
    with script_started(tmp_path, SCRIPT, method, "outside"):
        pid = wait_for(lambda: marked(tmp_path, "t").get("go.t0"), "the worker's task", BOUND)
        os.kill(pid, signal.SIGINT)
        wait_for((tmp_path / "go.k0").exists, "the worker's KeyboardInterrupt", BOUND)
        out = tmp_path / "out.txt"
        wait_for(lambda: "EXIT" in out.read_text(), "the worker's end", BOUND)
    assert "EXIT 1" in out.read_text(), (tmp_path / "err.txt").read_text()
    assert not marked(tmp_path, "d")
