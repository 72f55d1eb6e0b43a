"""An isolated step whose code holds the GIL for longer than the liveness timeout (one long
``re`` match: C code that never lets the step's heartbeat thread run) is healthy: the
orchestrating process sees its process use the CPU and beats for it
(``isolated_attempts.IsolatedExecutor``, ``local_process.LocalProcessBackend.working``), so it
is not judged lost. A step process that is stopped (SIGSTOP: it uses no CPU) still is. Real
processes: a pipeline script on a ``local_process`` stack; every wait has a deadline."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from wharf import Client
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc CPU times")

SCRIPT = """
import os
import re
import signal
import sys
import time

from wharf import pipeline, step


@step(enable_cache=False, runtime="isolated")
def busy(length: int, held: str) -> float:
    began = time.monotonic()
    re.match(r"(a+)+$", "a" * length + "b")  # catastrophic backtracking, all in C
    took = time.monotonic() - began
    with open(held, "w") as f:
        f.write(str(took))
    return took


@step(enable_cache=False, runtime="isolated")
def frozen() -> int:
    os.kill(os.getpid(), signal.SIGSTOP)
    return 1


@pipeline(raise_on_failure=False)
def holds_the_gil(length: int, held: str) -> None:
    busy(length=length, held=held)


@pipeline(raise_on_failure=False)
def stops_itself() -> None:
    frozen()


if __name__ == "__main__":
    if sys.argv[1] == "busy":
        holds_the_gil(length=int(sys.argv[2]), held=sys.argv[3])
    else:
        stops_itself()
"""

INTERVAL = 0.1  # a liveness timeout of 1.5 s
HOLD_SECONDS = 5.0  # how long the match should hold the GIL: over three liveness timeouts
BOUND = 120.0


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", str(INTERVAL))
    workspace = Workspace.open(load_config())
    try:
        make_stack(workspace, "procs", "local_process")
    finally:
        workspace.close()
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    (tmp_path / "script.py").write_text(SCRIPT)
    return tmp_path


def match_length(seconds: float) -> int:
    """A subject length whose match takes about ``seconds`` of CPU here (each extra
    character doubles the time). Measured in this process's CPU time: a wall-clock
    measurement taken while other processes had the CPU overrated the speed (the CI at
    9773139 held the GIL 2.1 s, not 5)."""
    length = 16
    while True:
        began = time.process_time()
        re.match(r"(a+)+$", "a" * length + "b")
        took = time.process_time() - began
        if took > 0.05:
            break
        length += 1
    while took < seconds:
        took, length = took * 2, length + 1
    return length


def run_script(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen(
        [sys.executable, "script.py", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = process.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        pytest.fail(f"the pipeline did not end in {BOUND} s:\n{out}")
    return subprocess.CompletedProcess(process.args, process.returncode, out, None)


def only_step() -> tuple[ExecutionStatus, str | None, ExecutionStatus]:
    with Client(load_config()) as client:
        (run,) = client.list_pipeline_runs().items
        (step,) = client.list_run_steps(run.id).items
    return step.status, step.status_reason, run.status


def test_a_step_holding_the_gil_longer_than_the_liveness_timeout_is_not_lost(home: Path) -> None:
    """Before, its heartbeat thread could not beat and nothing else did: the step was judged
    lost ("Heartbeat lost") after 1.5 s and killed while it worked."""
    held_file = home / "held"
    done = run_script(home, "busy", str(match_length(HOLD_SECONDS)), str(held_file))
    status, reason, run_status = only_step()
    assert (status, run_status) == (ExecutionStatus.COMPLETED, ExecutionStatus.COMPLETED), (
        reason,
        done.stdout,
    )
    assert float(held_file.read_text()) > 2 * (5 * INTERVAL + 1.0), (
        "the match was too short to prove anything"
    )


def test_a_stopped_step_process_is_still_lost(home: Path) -> None:
    """It uses no CPU: nothing beats for it, the liveness check fails it and its process is
    killed, within seconds (not at the end of its 60 s startup allowance)."""
    began = time.monotonic()
    done = run_script(home, "stopped")
    status, reason, run_status = only_step()
    assert (status, run_status) == (ExecutionStatus.FAILED, ExecutionStatus.FAILED), done.stdout
    assert reason is not None and reason.startswith("Heartbeat lost"), reason
    assert time.monotonic() - began < 50.0
