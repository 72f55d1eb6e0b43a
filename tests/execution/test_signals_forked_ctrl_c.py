# ruff: noqa: F811  (the home fixture imported from stop_scripts)
"""One Ctrl-C at the terminal while an inline step waits for its ``multiprocessing`` pool: the
terminal's SIGINT reaches the whole process group, pool workers included. Workers forked while
the run holds SIGINT ignore it, so the pool's tasks finish, the step gets its interrupt once its
``map`` returns and the run ends stopped; a second Ctrl-C still forces the stop and no worker is
left (a pool's, or a plain ``Process`` that ``multiprocessing`` joins at exit). A program the
step runs (``subprocess``, exec'd) gets the Ctrl-C as at a shell. Real pipeline scripts in a
process group of their own, signalled as a terminal does; every wait polls a marker file a
worker, the step or the script writes."""

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
from wharf.store.models import PageRequest, StepRunFilter

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, /proc")

TASKS = 8

SCRIPT = """
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

from wharf import pipeline, step

GO = sys.argv[1]
GATE = f"{GO}.gate"


def task(i: int) -> int:
    Path(f"{GO}.t{i}").write_text(str(os.getpid()))
    while not os.path.exists(GATE):  # the work: until the test opens the gate
        time.sleep(0.01)
    Path(f"{GO}.d{i}").write_text(str(os.getpid()))
    return i


@step(enable_cache=False)
def pooled() -> int:
    with multiprocessing.get_context("fork").Pool(4) as pool:
        Path(f"{GO}.started").write_text(str(os.getpid()))
        total = sum(pool.map(task, range(TASKS), chunksize=1))
    Path(f"{GO}.mapped").write_text(str(total))
    return total


@step(enable_cache=False)
def process() -> None:
    worker = multiprocessing.get_context("fork").Process(target=task, args=(0,))  # not daemonic
    worker.start()
    Path(f"{GO}.started").write_text(str(os.getpid()))
    worker.join()


@step(enable_cache=False)
def command() -> int:
    Path(f"{GO}.started").write_text(str(os.getpid()))
    wait = f'echo $$ > {GO}.c; while [ ! -e {GATE} ]; do sleep 0.01; done'
    done = subprocess.run(["sh", "-c", wait], check=False)
    Path(f"{GO}.returned{done.returncode}").touch()  # the name tells, whenever interrupted
    while not os.path.exists(GATE):  # more work, never done: the interrupt ends it
        time.sleep(0.01)
    return done.returncode


@pipeline
def with_pool() -> None:
    pooled()


@pipeline
def with_process() -> None:
    process()


@pipeline
def with_command() -> None:
    command()


if __name__ == "__main__":
    {"pool": with_pool, "process": with_process, "command": with_command}[sys.argv[2]]()
    print("the pipeline call returned")
""".replace("TASKS", str(TASKS))


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def marked(tmp_path: Path, kind: str) -> dict[str, int]:
    """The markers ``go.<kind><i>`` written so far: name -> the pid written in it."""
    found = {}
    for path in tmp_path.glob(f"go.{kind}[0-9]*"):
        text = path.read_text()
        if text:
            found[path.name] = int(text)
    return found


def ended(process: subprocess.Popen[bytes], err: Path) -> int:
    """The script's exit code; a script still running after a while fails the test."""
    try:
        return process.wait(timeout=BOUND / 2)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the run did not end:\n{err.read_text()}") from None


def stop_recorded(ws: Workspace) -> bool:
    """The run is recorded stopping (or stopped): the graceful stop interrupts its inline steps
    right after that write, with no other I/O between (``RunStopper.stop``), where the line
    the Ctrl-C prints comes before the write, which may wait for the store under load."""
    run = the_run(ws)
    return run is not None and run.status in (ExecutionStatus.STOPPING, ExecutionStatus.STOPPED)


def step_status(ws: Workspace) -> ExecutionStatus:
    run = the_run(ws)
    assert run is not None and run.status is ExecutionStatus.STOPPED, run
    steps = ws.store.steps.list(StepRunFilter(run_id=run.id), PageRequest()).items
    assert len(steps) == 1, steps
    return steps[0].status


def test_one_ctrl_c_lets_a_steps_fork_pool_finish_its_map(home: Workspace, tmp_path: Path) -> None:
    """Before, the Ctrl-C also killed the pool's workers (``KeyboardInterrupt`` tracebacks), their
    tasks were lost and ``map`` never returned: the run stayed stopping until a second Ctrl-C.
    Now the workers ignore it and finish every task; the step's interrupt comes as its ``map``
    returns (graceful: interrupted at its next safe point), the run ends stopped and the process
    exits as interrupted, no worker left."""
    err = tmp_path / "err.txt"
    with script_started(tmp_path, SCRIPT, "pool") as process:
        wait_for(lambda: len(marked(tmp_path, "t")) >= 4, "the pool's tasks", BOUND)
        os.killpg(process.pid, signal.SIGINT)
        wait_for(lambda: stop_recorded(home), "the graceful stop", BOUND)
        (tmp_path / "go.gate").write_text("open")
        code = ended(process, err)
    assert code == -signal.SIGINT, err.read_text()
    assert len(marked(tmp_path, "d")) == TASKS, err.read_text()  # no task was lost
    assert "KeyboardInterrupt" not in err.read_text()
    assert "Traceback" not in err.read_text()
    assert "Forcing the stop" not in err.read_text()
    assert "the pipeline call returned" not in (tmp_path / "out.txt").read_text()
    assert step_status(home) is ExecutionStatus.STOPPED
    seen = set(marked(tmp_path, "t").values())
    assert wait_until(lambda: not any(alive(pid) for pid in seen), 10), seen


@pytest.mark.parametrize(("mode", "workers"), [("pool", 4), ("process", 1)])
def test_a_second_ctrl_c_still_forces_the_stop_and_ends_the_workers(
    home: Workspace, tmp_path: Path, mode: str, workers: int
) -> None:
    """The workers' tasks never end (the gate stays shut): the second Ctrl-C forces the stop,
    and ends the workers as it would without the run; the process exits at once, no worker
    left. ``process``: a non-daemonic ``Process``, which ``multiprocessing`` joins at exit
    (forever, had the worker ignored the second Ctrl-C too)."""
    err = tmp_path / "err.txt"
    with script_started(tmp_path, SCRIPT, mode) as process:
        wait_for(lambda: len(marked(tmp_path, "t")) >= workers, "the workers' tasks", BOUND)
        os.killpg(process.pid, signal.SIGINT)
        wait_for(lambda: "Stopping run" in err.read_text(), "the graceful stop", BOUND)
        os.killpg(process.pid, signal.SIGINT)
        code = ended(process, err)
    assert code == -signal.SIGINT, err.read_text()
    assert "Forcing the stop" in err.read_text()
    assert not marked(tmp_path, "d")
    # ``process``: ending the worker ends the step's join, and a step that returns before it
    # hears the stop keeps its result (as any step that finishes first); a loaded machine
    # lets it return first now and then
    ends = {ExecutionStatus.STOPPED} | ({ExecutionStatus.COMPLETED} if mode == "process" else set())
    assert step_status(home) in ends
    seen = set(marked(tmp_path, "t").values())
    assert wait_until(lambda: not any(alive(pid) for pid in seen), 10), seen


def test_one_ctrl_c_reaches_a_program_the_step_runs_as_at_a_shell(
    home: Workspace, tmp_path: Path
) -> None:
    """An exec'd program is not one of the step's workers: the terminal's Ctrl-C ends it (or
    does whatever the program makes of it) as at a shell, and ``subprocess.run`` returns. The
    step gets its interrupt there, or at its next safe point if it was quicker (here: its next
    work, never done): it ends stopped with the run, the process as interrupted."""
    err = tmp_path / "err.txt"
    with script_started(tmp_path, SCRIPT, "command") as process:
        child = tmp_path / "go.c"
        wait_for(lambda: child.exists() and child.read_text().strip(), "the command", BOUND)
        os.killpg(process.pid, signal.SIGINT)
        code = ended(process, err)
    assert code == -signal.SIGINT, err.read_text()
    assert "Forcing the stop" not in err.read_text()
    returned = [path.name for path in tmp_path.glob("go.returned*")]
    assert returned in ([], [f"go.returned{-signal.SIGINT}"]), returned  # killed by the Ctrl-C
    assert step_status(home) is ExecutionStatus.STOPPED
    assert wait_until(lambda: not alive(int(child.read_text())), 10)


EARLY_SIGINT = """
import os
import signal
import sys

EARLY = []


def sigint_on_fork() -> None:  # runs in the child before Wharf's at-fork hooks
    if EARLY:
        os.kill(os.getpid(), signal.SIGINT)


os.register_at_fork(after_in_child=sigint_on_fork)

import multiprocessing

from wharf import pipeline, step


def forced() -> None:  # the early Ctrl-C was the first: this one forces the run's stop
    try:
        os.kill(os.getpid(), signal.SIGINT)  # its handler runs before this returns
    except KeyboardInterrupt:
        sys.exit(5)


@step(enable_cache=False)
def forks() -> None:
    EARLY.append(True)
    worker = multiprocessing.get_context("fork").Process(target=forced)
    worker.start()
    EARLY.clear()
    worker.join(60)
    print("EXIT", worker.exitcode, flush=True)


@pipeline(name="early_sigint")
def early_sigint() -> None:
    forks()


if __name__ == "__main__":
    early_sigint()
"""


def test_a_ctrl_c_reaching_a_worker_as_it_is_forked_is_ignored_and_the_next_forces(
    home: Workspace, tmp_path: Path
) -> None:
    """A Ctrl-C that reaches a worker just forked, as Wharf's at-fork hooks run, is ignored
    there (before, the run's handler raised ``KeyboardInterrupt`` in the hooks); the next one
    is the one that forces the run's stop: Python's default raises ``KeyboardInterrupt`` in the
    worker. The worker's first Ctrl-C comes from an earlier at-fork hook."""
    (tmp_path / "script.py").write_text(EARLY_SIGINT)
    done = subprocess.run(
        [sys.executable, "script.py"],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert done.returncode == 0, done.stderr
    assert "EXIT 5" in done.stdout, done.stdout + done.stderr
    assert "KeyboardInterrupt" not in done.stderr
    assert "Stopping run" not in done.stderr


NESTED = """
import multiprocessing
import os
import signal

from wharf import pipeline, step


@step(enable_cache=False)
def interrupted() -> None:
    os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C for the worker's own run


@pipeline(name="inner")
def inner() -> None:
    interrupted()


def runs_inner() -> None:
    try:
        inner()
    except KeyboardInterrupt as exc:
        print("INNER", exc, flush=True)


@step(enable_cache=False)
def forks() -> None:
    worker = multiprocessing.get_context("fork").Process(target=runs_inner)
    worker.start()
    worker.join(60)
    print("EXIT", worker.exitcode, flush=True)


@pipeline(name="outer")
def outer() -> None:
    forks()


if __name__ == "__main__":
    outer()
"""


def test_a_pipeline_a_forked_worker_runs_takes_its_ctrl_c_over(
    home: Workspace, tmp_path: Path
) -> None:
    """A forked worker that runs a pipeline of its own: that run takes over the SIGINT the
    worker inherited from its parent's run, as it takes over Python's default: a Ctrl-C stops
    it (and is not taken for one of the parent's run)."""
    (tmp_path / "script.py").write_text(NESTED)
    done = subprocess.run(
        [sys.executable, "script.py"],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert done.returncode == 0, done.stderr
    assert "EXIT 0" in done.stdout, done.stdout + done.stderr
    assert "INNER Run 'inner-" in done.stdout, done.stdout + done.stderr
    assert "Stopping run 'inner-" in done.stderr, done.stderr
    assert "Stopping run 'outer-" not in done.stderr, done.stderr


def test_a_stop_forced_from_another_process_ends_a_plain_process_the_step_started(
    home: Workspace, tmp_path: Path
) -> None:
    """``wharf runs stop --force`` sends no Ctrl-C: the step's non-daemonic ``Process``, which
    ``multiprocessing`` joins at exit, is terminated by the forced exit, so the script exits and
    no worker is left (as when two Ctrl-Cs close together reach the worker as one)."""
    err = tmp_path / "err.txt"
    with script_started(tmp_path, SCRIPT, "process") as process:
        wait_for(lambda: len(marked(tmp_path, "t")) >= 1, "the worker's task", BOUND)
        run = the_run(home)
        assert run is not None
        stop = subprocess.run(
            [sys.executable, "-m", "wharf.cli.main", "runs", "stop", str(run.id), "--force"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert stop.returncode == 0, stop.stderr
        ended(process, err)
    assert not marked(tmp_path, "d")
    assert step_status(home) is ExecutionStatus.STOPPED
    seen = set(marked(tmp_path, "t").values())
    assert wait_until(lambda: not any(alive(pid) for pid in seen), 10), seen
