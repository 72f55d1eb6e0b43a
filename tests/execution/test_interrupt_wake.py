"""A step interrupted while its thread blocks in a system call (a read, a sleep, a wait) gets
the interrupt there, not only once the call returns, when that thread is the main thread: a
dynamic pipeline's inline step (``wharf.execution.interrupt``: the run's signal handling wakes
the main thread with a signal; a step's own process does the same for its user code)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from wharf import get_step_context, pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.execution.interrupt import WAKE_SIGNAL, StepInterrupted
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter

WRITTEN_AFTER = 10.0
"""Seconds after which a write ends the step's blocking read, so the test ends either way."""


@step(enable_cache=False)
def stop_own_run_then_block(marker: str) -> str:
    """Ask for this run to stop (as another terminal would), then at once block in a read that
    only a write ``WRITTEN_AFTER`` seconds later would end; ``marker`` tells which ended it."""
    run_id = str(get_step_context().pipeline_run.id)
    read_end, write_end = os.pipe()
    written = threading.Event()

    def write() -> None:
        written.set()
        os.write(write_end, b"x")

    timer = threading.Timer(WRITTEN_AFTER, write)
    timer.start()
    stopping = subprocess.Popen([sys.executable, "-m", "wharf.cli.main", "runs", "stop", run_id])
    try:
        os.read(read_end, 1)
    except StepInterrupted:
        Path(marker).write_text("the write" if written.is_set() else "the interrupt")
        raise
    finally:
        timer.cancel()
        stopping.wait()
    return "read"


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.3")
    ws = Workspace.open(load_config())
    yield ws
    ws.close()


@pytest.mark.timeout(30)
def test_a_dynamic_pipelines_inline_step_blocked_in_the_main_thread_is_interrupted(
    workspace: Workspace, tmp_path: Path
) -> None:
    marker = tmp_path / "ended-by"

    @pipeline(dynamic=True)
    def p() -> None:
        stop_own_run_then_block(str(marker))  # a single call runs in the calling (main) thread

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.STOPPED
    assert marker.read_text() == "the interrupt"
    page = PageRequest(size=10)
    (ended,) = workspace.store.steps.list(StepRunFilter(run_id=run.id), page).items
    assert ended.status is ExecutionStatus.STOPPED
    assert signal.getsignal(WAKE_SIGNAL) is signal.SIG_DFL  # given back with the run's signals


@pytest.fixture
def process_workspace(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A workspace whose active stack runs every step in its own process."""
    make_stack(workspace, "procs", "local_process")
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    ws = Workspace.open(load_config())
    yield ws
    ws.close()


@pytest.mark.timeout(30)
def test_a_step_in_its_own_process_blocked_in_a_system_call_is_interrupted(
    process_workspace: Workspace, tmp_path: Path
) -> None:
    marker = tmp_path / "ended-by"

    @pipeline
    def p() -> None:
        stop_own_run_then_block(str(marker))

    run = p.run_in(process_workspace)
    assert run.status is ExecutionStatus.STOPPED
    assert marker.read_text() == "the interrupt"
    (ended,) = process_workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
    assert ended.status is ExecutionStatus.STOPPED
    assert ended.pid is not None and ended.pid != os.getpid()  # it ran in its own process
