"""The run's signal handlers: where they are installed, what each signal does, and restoring.

Real signals sent to this (pytest's) process; the run's store is a stand-in for the port.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.waiting import wait_for
from wharf.core.enums import ExecutionStatus
from wharf.execution.interrupt import InterruptibleRegion
from wharf.execution.run_stop import ForcedStop, RunStopper
from wharf.execution.signals import RunSignals, sigterm_hook


class Runs:
    def __init__(self) -> None:
        self.updates: list[ExecutionStatus | None] = []

    def update(self, run_id: Any, update: Any) -> None:
        self.updates.append(update.status)


class Store:
    def __init__(self) -> None:
        self.runs = Runs()


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
def signals(store: Store) -> Iterator[RunSignals]:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    installed = RunSignals(RunStopper(store, uuid.uuid4()), "my-run")  # type: ignore[arg-type]
    yield installed
    installed.restore()


def test_handlers_are_installed_for_the_run_and_restored(signals: RunSignals) -> None:
    signals.install()
    assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    signals.restore()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_an_applications_own_handler_is_left_alone(signals: RunSignals) -> None:
    def mine(signum: int, frame: Any) -> None:
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        signals.install()
        assert signal.getsignal(signal.SIGTERM) is mine
        signals.restore()
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_nothing_is_installed_outside_the_main_thread(signals: RunSignals) -> None:
    thread = threading.Thread(target=signals.install)
    thread.start()
    thread.join()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_first_signal_stops_gracefully_second_forces(
    signals: RunSignals, store: Store, capfd: pytest.CaptureFixture[str]
) -> None:
    region = InterruptibleRegion()
    signals._stopper.add_region(region)
    signals.install()
    signal.raise_signal(signal.SIGINT)  # handled: no KeyboardInterrupt here
    wait_for(lambda: store.runs.updates == [ExecutionStatus.STOPPING], "the run to stop")
    wait_for(lambda: region.interrupted, "the region's interrupt")
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "Stopping run 'my-run' (Ctrl-C)" in err
    assert not signals.forced
    with pytest.raises(ForcedStop):
        signal.raise_signal(signal.SIGINT)
    assert signals.forced
    with pytest.raises(KeyboardInterrupt):  # a third: a way out
        signal.raise_signal(signal.SIGINT)


def test_the_call_ends_as_the_signal_asked(signals: RunSignals, store: Store) -> None:
    signals.install()
    signals.raise_if_signalled("completed")  # no signal: nothing
    signal.raise_signal(signal.SIGTERM)
    wait_for(lambda: store.runs.updates == [ExecutionStatus.STOPPING], "the run to stop")
    signals.restore()
    with pytest.raises(SystemExit) as exited:
        signals.raise_if_signalled("stopped")
    assert exited.value.code == 128 + signal.SIGTERM


def test_a_sigterm_hook_is_asked_first_inside_a_run(signals: RunSignals, store: Store) -> None:
    """A hook (e.g. the Kubernetes orchestrator pod's Job deadline) registers what a SIGTERM
    may mean without knowing the run's handlers: the run still takes SIGTERM over (before,
    the deadline took SIGTERM itself and handed early ones to the run's SIGINT handler)."""
    asked: list[str] = []
    take = {"now": False}

    def hook() -> bool:
        asked.append("hook")
        return take["now"]

    with sigterm_hook(hook):
        signals.install()
        assert signal.getsignal(signal.SIGTERM) == signals._handle  # the run's own
        take["now"] = True
        signal.raise_signal(signal.SIGTERM)  # the hook's: nothing for the run
        assert asked == ["hook"] and signals.received == []
        take["now"] = False
        signal.raise_signal(signal.SIGTERM)  # not the hook's: the run stops gracefully
        assert asked == ["hook", "hook"] and signals.received == [signal.SIGTERM]
        wait_for(lambda: store.runs.updates == [ExecutionStatus.STOPPING], "the run to stop")
        signals.restore()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_sigterm_hook_that_raises_interrupts_the_main_thread_outside_a_run() -> None:
    class Deadline(BaseException):
        pass

    def hook() -> bool:
        raise Deadline("passed")

    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    with pytest.raises(Deadline), sigterm_hook(hook):
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # given back


def test_a_hook_ending_while_a_run_holds_sigterm_leaves_the_default_behind(
    signals: RunSignals,
) -> None:
    """A hook's context that ends while a run's handlers are installed: the run's restore
    gives back Python's default, not the hooks' stand-in (which outlived every hook)."""
    context = sigterm_hook(lambda: False)
    context.__enter__()
    signals.install()
    context.__exit__(None, None, None)
    signals.restore()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_sigterm_no_hook_takes_ends_the_process_as_by_default() -> None:
    code = (
        "import os, signal\n"
        "from wharf.execution.signals import sigterm_hook\n"
        "with sigterm_hook(lambda: False):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    print('survived')\n"
    )
    command = [sys.executable, "-c", code]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stderr)
    assert "survived" not in done.stdout


def test_a_forked_child_does_not_inherit_the_hooks() -> None:
    code = (
        "import os, signal, sys\n"
        "from wharf.execution.signals import sigterm_hook\n"
        "def hook():\n"
        "    raise SystemExit(7)\n"
        "with sigterm_hook(hook):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        os._exit(0)\n"
        "    _, status = os.waitpid(pid, 0)\n"
        "    print(os.WIFSIGNALED(status) and os.WTERMSIG(status))\n"
    )
    command = [sys.executable, "-c", code]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == str(int(signal.SIGTERM)), (done.stdout, done.stderr)


FORKED_WORKER = """
import multiprocessing
import os
import signal

from wharf import pipeline, step


def blocked(ready, go) -> None:
    ready.set()
    go.wait(30)


def signalled(where: str, signum: int) -> None:  # a forked worker sent signum: how it ends
    context = multiprocessing.get_context("fork")
    ready, go = context.Event(), context.Event()
    worker = context.Process(target=blocked, args=(ready, go))
    worker.start()
    assert ready.wait(60)
    os.kill(worker.pid, signum)
    if where == "INSIDE" and signum == signal.SIGINT:  # ignored: the worker goes on
        go.set()
    worker.join(60)
    print(where, signal.Signals(signum).name, worker.exitcode, flush=True)


@step(enable_cache=False)
def forks() -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        signalled("INSIDE", signum)


@pipeline(name="forked_worker")
def forked_worker() -> None:
    forks()


if __name__ == "__main__":
    forked_worker()
    signalled("OUTSIDE", signal.SIGINT)  # no run: as in any Python process
"""


def run_script(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, text: str
) -> subprocess.CompletedProcess[str]:
    """Run pipeline script ``text`` in a new interpreter with a fresh Wharf home (default stack)."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "script.py").write_text(text)
    return subprocess.run(
        [sys.executable, "script.py"],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_inline_steps_forked_worker_ends_on_sigterm_and_ignores_a_first_ctrl_c(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a worker forked by an inline step (a ``multiprocessing`` pool's: the step runs in
    a thread of the pipeline's process, whose run took SIGINT and SIGTERM over) inherited the
    run's handlers: its SIGTERM (``Pool.terminate``, at the end of ``with Pool(...)``) only
    printed "Stopping run" and left it running, so the step hung joining it. Its first SIGINT
    (the terminal's Ctrl-C, which stops the run gracefully) is ignored; one forked once the run
    ended is interrupted as in any Python process. A real pipeline script in a new
    interpreter, on the default (inline) stack."""
    done = run_script(tmp_path, monkeypatch, FORKED_WORKER)
    assert done.returncode == 0, done.stderr
    assert f"INSIDE SIGTERM {-signal.SIGTERM}" in done.stdout, done.stdout + done.stderr
    assert "INSIDE SIGINT 0" in done.stdout, done.stdout + done.stderr
    assert "OUTSIDE SIGINT 1" in done.stdout, done.stdout + done.stderr
    assert done.stderr.count("KeyboardInterrupt") == 1, done.stderr  # the one outside
    assert "Stopping run" not in done.stderr


EARLY_SIGTERM = """
import os
import signal

EARLY = []


def sigterm_on_fork() -> None:  # runs in the child before Wharf's at-fork hooks
    if EARLY:
        os.kill(os.getpid(), signal.SIGTERM)


os.register_at_fork(after_in_child=sigterm_on_fork)

import multiprocessing

from wharf import pipeline, step


def idle() -> None:
    signal.pause()


@step(enable_cache=False)
def forks() -> None:
    EARLY.append(True)
    worker = multiprocessing.get_context("fork").Process(target=idle)
    worker.start()
    EARLY.clear()
    worker.join(60)
    print("EXIT", worker.exitcode, flush=True)


@pipeline(name="early_sigterm")
def early_sigterm() -> None:
    forks()


if __name__ == "__main__":
    early_sigterm()
"""


def test_a_sigterm_reaching_a_forked_worker_before_its_handlers_are_given_back_ends_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a SIGTERM that reached a worker forked by an inline step before the at-fork hook
    gave its handlers back (``Pool.terminate`` of a worker the pool had just started again, the
    others killed by a Ctrl-C) ran the run's handler in the worker, which took it for a stop of
    the run and lived on: ``with Pool(...)`` then waited for it forever. A real pipeline script
    whose worker gets its SIGTERM from an earlier at-fork hook."""
    done = run_script(tmp_path, monkeypatch, EARLY_SIGTERM)
    assert done.returncode == 0, done.stderr
    assert f"EXIT {-signal.SIGTERM}" in done.stdout, done.stdout + done.stderr
    assert "Stopping run" not in done.stderr, done.stderr
