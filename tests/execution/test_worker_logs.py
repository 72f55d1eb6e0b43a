"""What the ``multiprocessing`` workers of an inline step print is in the step's log, and still on
the console; several inline steps running at once each get their own workers' output only. A
worker outliving its step prints on to the console only, and is not held up by the step's
closed pipe. Real processes: pipeline scripts on the default (inline) stack, run in a new
interpreter; every wait in them is bounded, none is a sleep."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, forkserver")

BOUND = 120.0
METHODS = ("fork", "spawn", "forkserver")  # as in the scripts
LINES = 3000

POOLS = """
import multiprocessing
import os
import sys

from wharf import Client, pipeline, step

LINES = 3000
METHODS = ("fork", "spawn", "forkserver")
WAIT = 60


def work(job: tuple[str, int]) -> int:
    method, i = job
    for k in range(LINES):
        print(f"{method} worker {i} line {k} " + "x" * 60)
    print(f"{method} worker {i} on stderr", file=sys.stderr)
    return i


def last_words(method: str) -> None:
    print(f"{method} last words before exiting", end="")  # unflushed, no newline: then it exits


@step(enable_cache=False)
def pooled(method: str) -> int:
    print(f"{method} step starts")
    context = multiprocessing.get_context(method)
    with context.Pool(2) as pool:
        total = sum(pool.map_async(work, [(method, 0), (method, 1)], chunksize=1).get(WAIT))
    last = context.Process(target=last_words, args=(method,))
    last.start()
    last.join(WAIT)
    if method == "fork":  # os.fork itself, no multiprocessing
        child = os.fork()
        if child == 0:
            print("a child of os.fork")
            sys.stdout.flush()
            os._exit(0)
        os.waitpid(child, 0)
    return total


@pipeline(name="pools")
def pools() -> None:
    for method in METHODS:
        pooled(method=method, id=method)


if __name__ == "__main__":
    run = pools()
    with Client() as client:
        for method in METHODS:
            print(f"<<LOG {method}>>" + client.step_logs(method, run=run.id) + "<<END>>")
"""

OUTLIVING = """
import multiprocessing

from wharf import Client, pipeline, step

METHODS = ("fork", "spawn", "forkserver")
WAIT = 60
workers = []


def late(method: str, started, go) -> None:
    print(f"{method} before the step's end", flush=True)
    started.set()
    go.wait(WAIT)
    for k in range(3000):  # more than a pipe holds: a write blocked on it would hang
        print(f"{method} after the step's end {k} " + "y" * 60)
    print(f"{method} worker done", flush=True)


@step(enable_cache=False)
def leaves(method: str) -> None:
    context = multiprocessing.get_context(method)
    started, go = context.Event(), context.Event()
    worker = context.Process(target=late, args=(method, started, go))
    worker.start()
    workers.append((worker, go))
    assert started.wait(WAIT)


@pipeline(name="outliving")
def outliving() -> None:
    for method in METHODS:
        leaves(method=method, id=method)


if __name__ == "__main__":
    run = outliving()
    for worker, go in workers:
        go.set()
        worker.join(WAIT)
        print("EXIT CODE", worker.exitcode)
    with Client() as client:
        for method in METHODS:
            print(f"<<LOG {method}>>" + client.step_logs(method, run=run.id) + "<<END>>")
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh embedded workspace on the default stack: every step runs inline."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def run_script(where: Path, source: str) -> tuple[str, str]:
    """Run ``source`` as a pipeline script; its stdout and stderr."""
    (where / "script.py").write_text(source)
    ran = subprocess.run(
        [sys.executable, "script.py"],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    return ran.stdout, ran.stderr


def step_logs(out: str) -> dict[str, str]:
    return {m: out.split(f"<<LOG {m}>>")[1].split("<<END>>", maxsplit=1)[0] for m in METHODS}


def test_the_workers_of_inline_steps_print_into_their_steps_logs(home: Path) -> None:
    """Before, the steps' logs held only what their own threads printed."""
    out, err = run_script(home, POOLS)
    logs = step_logs(out)
    for method, log in logs.items():
        assert f"{method} step starts" in log
        for i in (0, 1):
            lines = [f"{method} worker {i} line {k} " + "x" * 60 for k in range(LINES)]
            assert [line for line in log.splitlines() if line in lines] == lines, method
            assert f"{method} worker {i} on stderr" in log
        assert f"{method} last words before exiting" in log
        for other in set(METHODS) - {method}:  # three steps ran at once
            assert not any(line.startswith(f"{other} ") for line in log.splitlines()), other
    assert "a child of os.fork" in logs["fork"]
    # and on the console still, as what the steps print themselves
    console = out.split("<<LOG ")[0]
    for method in METHODS:
        assert console.count(f"{method} worker 0 line ") == LINES
        assert f"{method} last words before exiting" in console
        assert f"{method} worker 1 on stderr" in err
    assert console.count("a child of os.fork") == 1


def test_a_worker_outliving_its_step_prints_to_the_console_only(home: Path) -> None:
    out, _ = run_script(home, OUTLIVING)
    assert out.count("EXIT CODE 0") == len(METHODS), out[-3000:]
    logs = step_logs(out)
    for method, log in logs.items():
        assert log == f"{method} before the step's end\n"
        assert f"{method} worker done" in out
        assert out.count(f"{method} after the step's end ") == 3000
