"""A child forked by an inline step's code (a raw ``os.fork``) that leaves by ``sys.exit``, an
uncaught exception or a return ends there with the exit code Python would give it, never
recording, finishing or logging its parent's step (:mod:`wharf.execution.forked_children`).

A real pipeline script in a new interpreter, on the default (inline) stack.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from wharf import Client
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus

pytestmark = pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="os.fork")

SCRIPT = """
import os
import sys

from wharf import pipeline, step
from wharf.artifacts.materializers.base import Materializer


def exits() -> None:
    print("child exits", flush=True)
    sys.exit(3)


def says_why() -> None:
    sys.exit("the child gives up")


def raises() -> None:
    raise RuntimeError("the child fails")


def interrupted() -> None:
    raise KeyboardInterrupt


def returns() -> None:
    pass


def exit_code_of(leave) -> int:
    pid = os.fork()
    if pid == 0:
        leave()  # the child goes on with the step's code from here
        return -100
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


class Forked:
    pass


class ForksToo(Materializer):
    ASSOCIATED_TYPES = (Forked,)

    def save(self, data) -> None:
        print("SAVE", exit_code_of(lambda: sys.exit(4)), flush=True)
        self.write_bytes("value", b"1")

    def load(self, data_type) -> Forked:
        print("LOAD", exit_code_of(raises), flush=True)
        return Forked()


@step(enable_cache=False)
def forks() -> int:
    codes = [exit_code_of(leave) for leave in (exits, says_why, raises, interrupted, returns)]
    print("CODES", codes, flush=True)
    return os.getpid()


@step(enable_cache=False, output_materializers=ForksToo)
def makes() -> Forked:
    return Forked()


@step(enable_cache=False)
def takes(value: Forked) -> int:
    return os.getpid()


@pipeline(name="forking")
def forking() -> None:
    forks()
    takes(makes())


if __name__ == "__main__":
    forking()
    print("PARENT", os.getpid(), flush=True)
"""


def test_a_forked_child_that_leaves_ends_there_and_leaves_the_step_to_its_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the child unwound through Wharf's step code: it recorded the step failed
    (``StepAbortError`` for the exit, the ``RuntimeError``) or saved and recorded the child's
    output, and closed the step's log capture, while the parent's step went on."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "script.py").write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, "script.py"],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    shown = done.stdout + done.stderr
    assert done.returncode == 0, shown
    assert f"CODES [3, 1, 1, {-signal.SIGINT}, 0]" in done.stdout, shown
    assert "SAVE 4" in done.stdout and "LOAD 1" in done.stdout, shown
    # What Python shows for the child when it leaves so:
    assert done.stdout.count("child exits") == 1, shown
    assert "the child gives up" in done.stderr, shown
    assert "RuntimeError: the child fails" in done.stderr, shown
    assert "KeyboardInterrupt" in done.stderr, shown
    assert "failed" not in shown and "StepAbortError" not in shown, shown
    parent = int(done.stdout.split("PARENT ")[1].split()[0])
    with Client(load_config()) as client:
        (run,) = client.list_pipeline_runs().items
        steps = client.list_run_steps(run.id).items
        assert run.status is ExecutionStatus.COMPLETED
        assert sorted((s.name, s.attempt, s.status, s.status_reason) for s in steps) == [
            (name, 1, ExecutionStatus.COMPLETED, None) for name in ("forks", "makes", "takes")
        ]
        assert client.load_step_output(run.id, "forks") == parent
        assert client.load_step_output(run.id, "takes") == parent
    logs = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", "steps", "logs", str(run.id), "forks"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert f"CODES [3, 1, 1, {-signal.SIGINT}, 0]" in logs.stdout, logs.stdout + logs.stderr
