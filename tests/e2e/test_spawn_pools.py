"""Process pools started with ``spawn`` or ``forkserver`` inside an isolated step, over functions
of the user's pipeline script: a step's own process executes the script as module
``__wharf_script__``, which its pool's workers must import too, as they would the script's
``__main__`` when it runs its steps itself.

Real processes: the script runs in a new interpreter on a ``local_process`` stack (each step in
a process of its own; or, travelling, each in a new interpreter with the code from the run's
code archive), whose pools start real workers. Each wait in the step is bounded: a worker that
cannot import the script fails the step instead of hanging it."""

from __future__ import annotations

import re
import sqlite3
import tarfile
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from tests.e2e.test_script_classes import procs, run_script
from wharf import Client
from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace

__all__ = ["procs"]  # a fixture: each step in a process of its own, forked from a warm one

POOLS = """
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

from wharf import Client, pipeline, step

WAIT = 30
STEP_PROCESS = os.getpid()  # in a worker: the worker's own pid (it executes the script too)
print(f"EXECUTED {__name__}\\n", end="", flush=True)  # one write: workers print at once


def square(x: int) -> int:
    return x * x


def where(_: int) -> str:
    return f"{__name__} {STEP_PROCESS == os.getpid()}"


@step
def pooled(method: str) -> str:
    context = multiprocessing.get_context(method)
    with context.Pool(2) as pool:
        squares = pool.map_async(square, range(4)).get(timeout=WAIT)
        named = pool.map_async(where, [0]).get(timeout=WAIT)[0]
    with ProcessPoolExecutor(2, mp_context=context) as executor:
        more = list(executor.map(square, range(4), timeout=WAIT))
    return f"{method} {squares} {more} {named}"


@pipeline(name="pools")
def pools() -> None:
    pooled(method="spawn", id="spawn")
    pooled(method="forkserver", id="forkserver")


if __name__ == "__main__":
    run = pools()
    with Client() as client:
        for name in ("spawn", "forkserver"):
            print("RESULT", client.load_step_output(run.id, name))
            print("LOG", name, client.step_logs(name, run=run.id))
"""


@pytest.fixture
def travelling(wharf_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Wharf home, inside the script's directory, whose active stack runs each isolated step
    as if on another machine (a new interpreter, the code from the run's code archive)."""
    workspace = Workspace.open(load_config())
    try:
        orchestrator_config = {"code_travels": True}
        make_stack(workspace, "travels", "local_process", orchestrator_config=orchestrator_config)
    finally:
        workspace.close()
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "travels")
    return wharf_home


def check_pools(out: str) -> None:
    """``POOLS``'s output: right results, the script executed where it must, no complaint."""
    # the workers import the script as the step's process does, its main block skipped
    for method in ("spawn", "forkserver"):
        expected = f"RESULT {method} [0, 1, 4, 9] [0, 1, 4, 9] __wharf_script__ True"
        assert expected in out, out
        # by the step's process and by each worker, under the step process's name for it
        # (each line is one write: the processes print at once)
        log = out.split(f"LOG {method} ")[1].split("RESULT", maxsplit=1)[0]
        assert set(re.findall(r"EXECUTED\s+(\S+)", log)) == {"__wharf_script__"}, out
        assert log.count("EXECUTED") >= 3, out
    # the script itself once, as __main__; every other execution as the step's process names it
    assert set(re.findall(r"EXECUTED\s+(\S+)", out)) == {"__main__", "__wharf_script__"}, out
    assert out.count("__main__") == 1, out
    # and without a complaint: no worker failed to start or warned
    for word in ("Traceback", "Error", "Warning"):
        assert word not in out, out


def test_spawn_and_forkserver_pools_of_an_isolated_step_run_the_scripts_functions(
    procs: Path, tmp_path: Path
) -> None:
    check_pools(run_script(tmp_path, "pools.py", POOLS))


def test_pools_of_travelling_steps_with_the_store_inside_the_scripts_directory(
    travelling: Path, tmp_path: Path
) -> None:
    """The run's code archive is made of the script's directory, which holds Wharf's home and
    its live SQLite store (as a project-local ``WHARF_HOME`` would). Packaging the store's
    file opened and closed it in the pipeline's process, which dropped that process's SQLite
    locks on it: a step's completion was lost ("exited with code 0 before reporting its
    result", mostly the forkserver step's, which ends first; 21 of 30 runs) or the file was
    left malformed. Wharf's files never travel now."""
    check_pools(run_script(tmp_path, "pools.py", POOLS))
    archives = list((travelling / "artifacts" / "code").glob("*.tar.gz"))
    assert len(archives) == 1, archives
    with tarfile.open(archives[0]) as archive:
        assert archive.getnames() == ["pools.py"]
    with sqlite3.connect(travelling / "wharf.db") as database:
        assert database.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


UNGUARDED = """
import multiprocessing

from wharf import Client, pipeline, step


def square(x: int) -> int:
    return x * x


@step
def pooled() -> list[int]:
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        return pool.map_async(square, range(4)).get(timeout=30)


@pipeline(name="unguarded_pools")
def pools() -> None:
    pooled()


run = pools()  # no main guard: a worker, like the step's process, stops here
with Client() as client:
    print("RESULT", client.load_step_output(run.id, "pooled"))
"""


def test_a_spawn_pools_worker_never_runs_an_unguarded_scripts_pipeline(
    procs: Path, tmp_path: Path
) -> None:
    out = run_script(tmp_path, "unguarded.py", UNGUARDED)
    assert "RESULT [0, 1, 4, 9]" in out, out
    with Client(load_config()) as client:  # no run started by a worker
        assert len(client.list_pipeline_runs().items) == 1
