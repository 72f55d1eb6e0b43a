"""Ctrl-C, SIGTERM and kill -9 of a real pipeline process (``python script.py``).

The script's step blocks until a file exists (it polls it), so the test decides when a step
ends; the signals go to the script's process group, as a terminal sends them. Every wait polls
a condition with a deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from tests.waiting import wait_for
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, RunFilter, StepRunFilter

SCRIPT = """
import os
import sys
import time
import uuid
from pathlib import Path

from wharf import pipeline, step, unmapped


@step(enable_cache=False)
def block(go: str, stubborn: bool) -> int:
    starting = f"{go}.{uuid.uuid4().hex}.starting"  # one per step: a map runs several
    Path(starting).write_text(str(os.getpid()))
    os.replace(starting, go + ".started")  # seen whole or not at all
    while True:
        try:
            while not Path(go).exists():
                time.sleep(0.02)
            return 1
        except BaseException:  # the stop's interrupt
            Path(go + ".interrupted").write_text("yes")
            if not stubborn:
                raise


@step(enable_cache=False)
def after(x: int) -> int:
    return x


@pipeline
def blocking(go: str, stubborn: bool = False) -> None:
    after(block(go=go, stubborn=stubborn))


@pipeline(dynamic=True)
def blocking_dynamic(go: str, stubborn: bool = False) -> None:
    after(block(go=go, stubborn=stubborn))  # block runs in this (the main) thread


@pipeline(dynamic=True)
def blocking_submitted(go: str, stubborn: bool = False) -> None:
    block.submit(go=go, stubborn=stubborn).wait()  # block runs in a thread of the run's pool


@pipeline(dynamic=True)
def blocking_mapped(go: str, stubborn: bool = False) -> None:
    block.map([go, go], stubborn=unmapped(stubborn)).wait()  # block_0, block_1 in pool threads


if __name__ == "__main__":
    chosen = {
        "dynamic": blocking_dynamic,
        "submitted": blocking_submitted,
        "mapped": blocking_mapped,
    }.get(sys.argv[3], blocking)
    go, stubborn = sys.argv[1], sys.argv[2] == "stubborn"
    chosen(go=go, stubborn=stubborn)
    print("the pipeline call returned", flush=True)
    # A forced stop gives up on a stubborn step at once: its thread, left running, may not have
    # run since its interrupt was sent; it sees it before this process exits (bounded wait).
    deadline = time.monotonic() + 30
    while stubborn and not Path(go + ".interrupted").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
"""

BOUND = 60.0  # seconds: a hang fails the test instead of blocking it
FINAL = {
    ExecutionStatus.COMPLETED,
    ExecutionStatus.FAILED,
    ExecutionStatus.STOPPED,
    ExecutionStatus.CANCELLED,
    ExecutionStatus.CACHED,
}


@pytest.fixture
def scripts() -> Iterator[list[Script]]:
    """The scripts a test started; whatever is left of them is killed at the end."""
    started: list[Script] = []
    yield started
    for script in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(script.process.pid, signal.SIGKILL)
        script.process.wait()
        if script.started.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(script.started.read_text()), signal.SIGKILL)


@pytest.fixture
def home(wharf_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    ws = Workspace.open(load_config())
    make_stack(ws, "procs", "local_process")
    # Steps in a new interpreter (the component names one): no fork server in between.
    make_stack(ws, "procs_python", "local_process", orchestrator_config={"python": sys.executable})
    yield ws
    ws.close()


class Script:
    """The pipeline script running in its own session (like a job in a terminal)."""

    def __init__(
        self,
        started: list[Script],
        tmp_path: Path,
        stack: str,
        stubborn: bool = False,
        dynamic: bool = False,
        shape: str | None = None,
    ) -> None:
        """``shape``: the pipeline, ``static``, ``dynamic`` (the step in the main thread),
        ``submitted`` (a dynamic pipeline's step in a pool thread) or ``mapped`` (two of them,
        by ``block.map``); None: as ``dynamic`` says."""
        (tmp_path / "script.py").write_text(SCRIPT)
        self.go = tmp_path / "go"
        env = {**os.environ, "WHARF_ACTIVE_STACK": stack}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "script.py",
                str(self.go),
                "stubborn" if stubborn else "plain",
                shape or ("dynamic" if dynamic else "static"),
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.started = Path(f"{self.go}.started")
        self.interrupted = Path(f"{self.go}.interrupted")
        started.append(self)

    def wait_until_step_runs(self) -> int:
        """The pid of the process running the step."""
        wait_for(
            lambda: self.started.exists() or self.process.poll() is not None, "the step", BOUND
        )
        assert self.started.exists(), self.process.communicate()
        return int(self.started.read_text())

    def signal(self, signum: int) -> None:
        os.killpg(self.process.pid, signum)

    def finish(self) -> tuple[int, str, str]:
        try:
            out, err = self.process.communicate(timeout=BOUND)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
            raise AssertionError(f"the script did not end:\n{out}\n{err}") from None
        return self.process.returncode, out, err


def the_run(ws: Workspace) -> tuple[ExecutionStatus, dict[str, tuple[ExecutionStatus, str]]]:
    (run,) = ws.store.runs.list(RunFilter(), PageRequest()).items
    steps = ws.store.steps.list(StepRunFilter(run_id=run.id), PageRequest()).items
    return run.status, {s.name: (s.status, s.status_reason or "") for s in steps}


def assert_one_stop_line(err: str, signal_name: str) -> None:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "Stopping run" in line]
    assert len(lines) == 1, err
    assert f"({signal_name})" in lines[0] and "Ctrl-C again to force" in lines[0]


@pytest.mark.parametrize(
    ("stack", "dynamic"), [("default", False), ("procs", False), ("default", True)]
)
def test_first_ctrl_c_stops_the_run(
    home: Workspace, scripts: list[Script], tmp_path: Path, stack: str, dynamic: bool
) -> None:
    """Inline (default stack; in a dynamic pipeline, in the main thread) and isolated
    (local_process) steps are interrupted, the run ends stopped, nothing new starts, and the
    process ends as interrupted, with one line."""
    script = Script(scripts, tmp_path, stack, dynamic=dynamic)
    script.wait_until_step_runs()
    script.signal(signal.SIGINT)
    code, out, err = script.finish()
    assert code == -signal.SIGINT, err  # what a shell shows as 130
    assert_one_stop_line(err, "Ctrl-C")
    assert "the pipeline call returned" not in out
    assert script.interrupted.exists()  # the step's own code saw the interrupt
    status, steps = the_run(home)
    assert status is ExecutionStatus.STOPPED
    assert steps == {"block": (ExecutionStatus.STOPPED, steps["block"][1])}


@pytest.mark.parametrize("stack", ["procs", "procs_python"])
def test_ctrl_c_reaches_an_isolated_step_at_once_at_the_default_heartbeat(
    home: Workspace,
    scripts: list[Script],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    stack: str,
) -> None:
    """At the default 15 s heartbeat, a Ctrl-C reaches a running local_process step (forked
    from the fork server, or a new interpreter) within seconds, not at its next beat: the
    orchestrator makes it beat at once. The step ends as before: interrupted, stopped."""
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "15")
    script = Script(scripts, tmp_path, stack)
    script.wait_until_step_runs()
    signalled = time.monotonic()
    script.signal(signal.SIGINT)
    code, out, err = script.finish()
    took = time.monotonic() - signalled
    assert code == -signal.SIGINT, err
    assert took < 8.0, f"the stop took {took:.1f} s:\n{err}"
    assert_one_stop_line(err, "Ctrl-C")
    assert "the pipeline call returned" not in out
    assert script.interrupted.exists()  # the step's own code saw the interrupt
    status, steps = the_run(home)
    assert status is ExecutionStatus.STOPPED
    assert steps == {"block": (ExecutionStatus.STOPPED, steps["block"][1])}


def test_sigterm_is_a_graceful_stop(home: Workspace, scripts: list[Script], tmp_path: Path) -> None:
    script = Script(scripts, tmp_path, "default")
    script.wait_until_step_runs()
    script.signal(signal.SIGTERM)
    code, _, err = script.finish()
    assert code == 128 + signal.SIGTERM, err
    assert_one_stop_line(err, "SIGTERM")
    status, steps = the_run(home)
    assert status is ExecutionStatus.STOPPED
    assert steps["block"][0] is ExecutionStatus.STOPPED and "after" not in steps


@pytest.mark.parametrize("stack", ["default", "procs"])
def test_second_ctrl_c_forces_the_stop(
    home: Workspace, scripts: list[Script], tmp_path: Path, stack: str
) -> None:
    """A step that ignores its interrupt: the second Ctrl-C kills its process (isolated) or
    gives up on its thread (inline); every step is recorded final, the run stopped, and the
    summary the pipeline call prints counts the step stopped, as the store has it."""
    script = Script(scripts, tmp_path, stack, stubborn=True)
    step_pid = script.wait_until_step_runs()
    script.signal(signal.SIGINT)
    wait_for(script.interrupted.exists, "the step to be interrupted", BOUND)
    script.signal(signal.SIGINT)
    code, _, err = script.finish()
    assert code == -signal.SIGINT, err
    assert "Traceback" not in err, err
    assert "Forcing the stop" in err
    status, steps = the_run(home)
    assert status is ExecutionStatus.STOPPED
    assert {s for s, _ in steps.values()} <= FINAL, steps
    assert steps["block"][0] is ExecutionStatus.STOPPED
    assert len([line for line in err.splitlines() if "Step 'block' stopped" in line]) == 1, err
    (summary,) = [line for line in err.splitlines() if "Run 'blocking-" in line and " in " in line]
    assert " stopped in " in summary, err  # the run's reason says the stop was forced
    assert summary.endswith(": 1 stopped. Force-stopped on request."), err
    if stack == "procs":
        wait_for(lambda: not alive(step_pid), "the step process to be gone", timeout=10)


@pytest.mark.parametrize("shape", ["submitted", "mapped"])
def test_second_ctrl_c_ends_the_process_despite_stuck_pool_steps(
    home: Workspace, scripts: list[Script], tmp_path: Path, shape: str
) -> None:
    """Stubborn steps started by ``.submit`` or ``.map`` run in threads of the dynamic run's
    pool: after the second Ctrl-C those threads do not keep the process alive (the steps are
    given up on, recorded stopped), and it exits as interrupted, at once."""
    script = Script(scripts, tmp_path, "default", stubborn=True, shape=shape)
    script.wait_until_step_runs()
    script.signal(signal.SIGINT)
    wait_for(script.interrupted.exists, "the step to be interrupted", BOUND)
    script.signal(signal.SIGINT)
    code, out, err = script.finish()
    assert code == -signal.SIGINT, err
    assert "Traceback" not in err, err
    assert "Forcing the stop" in err
    assert "the pipeline call returned" not in out
    status, steps = the_run(home)
    assert status is ExecutionStatus.STOPPED
    assert steps and {s for s, _ in steps.values()} == {ExecutionStatus.STOPPED}, steps


@pytest.mark.parametrize("shape", ["static", "submitted"])
def test_a_forced_stop_from_another_terminal_ends_a_stubborn_inline_step(
    home: Workspace, scripts: list[Script], tmp_path: Path, shape: str
) -> None:
    """`wharf runs stop RUN --force` from another process while an inline step (in a step
    thread) ignores its interrupt: the orchestrating process stops waiting for it at once, as
    a second Ctrl-C does, instead of until its code returns (never, here): the step ends
    stopped, the run stopped, and the pipeline call returns."""
    script = Script(scripts, tmp_path, "default", stubborn=True, shape=shape)
    script.wait_until_step_runs()
    (run,) = home.store.runs.list(RunFilter(), PageRequest()).items
    stop = [sys.executable, "-m", "wharf.cli.main", "runs", "stop", str(run.id), "--force"]
    stopping = subprocess.run(stop, check=False, capture_output=True, text=True, timeout=BOUND)
    assert stopping.returncode == 0, stopping.stderr
    wait_for(lambda: the_run(home)[0] in FINAL, "the run to end", BOUND)
    status, steps = the_run(home)
    assert status is ExecutionStatus.STOPPED
    assert steps["block"][0] is ExecutionStatus.STOPPED, steps
    assert "after" not in steps
    # The step's thread (for "submitted", of the dynamic run's pool) never keeps the process
    # from exiting.
    code, out, err = script.finish()
    assert code == 0, err
    assert "the pipeline call returned" in out, err
    # The graceful interrupt came first, and was ignored. Not checked when the run ends: the
    # forced stop does not wait for the step's code to see it (the process may end the run
    # before the step's thread runs again); the script waits for that before it exits.
    assert script.interrupted.exists()
    assert len([line for line in err.splitlines() if "Step 'block' stopped" in line]) == 1, err


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's zombie may wait for its reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def children_of(pid: int) -> dict[int, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found[int(entry.name)] = command
    return found


@pytest.mark.parametrize("stack", ["procs", "procs_python"])
def test_nothing_outlives_a_killed_pipeline_process(
    home: Workspace, scripts: list[Script], tmp_path: Path, stack: str
) -> None:
    """kill -9 of the pipeline process: its step process ends (stopped, it noticed), and the
    multiprocessing fork server and resource tracker (when steps are forked) exit with it."""
    script = Script(scripts, tmp_path, stack)
    step_pid = script.wait_until_step_runs()
    helpers = children_of(script.process.pid)
    if stack == "procs":
        assert any("forkserver" in c for c in helpers.values()), helpers
        assert any("resource_tracker" in c for c in helpers.values()), helpers
    else:
        assert step_pid in helpers
    script.signal(signal.SIGKILL)
    script.finish()
    for pid in [step_pid, *helpers]:
        wait_for(lambda pid=pid: not alive(pid), f"process {pid} to end", timeout=30)
    _, steps = the_run(home)
    assert steps["block"][0] is ExecutionStatus.STOPPED
    assert "orchestrating process" in steps["block"][1]
