"""A step in its own process that blocks in a system call (a read, a sleep, a wait) is
interrupted there when its run is stopped, not only once the call returns
(``wharf.execution.entrypoint``: the interrupt wakes the step's main thread with a signal)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from wharf import get_step_context, pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter


@step(enable_cache=False)
def stop_own_run_then_block() -> int:
    """Ask for this run to stop (as another terminal would), then block in a read that no
    write ever ends."""
    run_id = str(get_step_context().pipeline_run.id)
    subprocess.run([sys.executable, "-m", "wharf.cli.main", "runs", "stop", run_id], check=True)
    read_end, _write_end = os.pipe()
    os.read(read_end, 1)
    return 0


@pytest.fixture
def process_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.3")
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    monkeypatch.chdir(tmp_path)
    ws = Workspace.open(load_config())
    make_stack(ws, "procs", "local_process")
    yield ws
    ws.close()


@pytest.mark.timeout(30)
def test_a_stopped_run_interrupts_its_isolated_step_blocked_in_a_system_call(
    process_workspace: Workspace,
) -> None:
    @pipeline
    def p() -> None:
        stop_own_run_then_block()

    run = p.run_in(process_workspace)  # without the wake it would never return
    assert run.status is ExecutionStatus.STOPPED
    page = PageRequest(size=10)
    (ended,) = process_workspace.store.steps.list(StepRunFilter(run_id=run.id), page).items
    assert ended.status is ExecutionStatus.STOPPED
    assert ended.status_reason == "Step was stopped on request (run stopping)."
