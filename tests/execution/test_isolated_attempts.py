"""An isolated step whose process ends without recording its result (killed, as by the OOM
killer, or exiting at once) gets its retries like a step that raised
(``wharf.execution.isolated_attempts.IsolatedExecutor``), with real step processes."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from wharf import RetryConfig, pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter


@step(enable_cache=False, retry=RetryConfig(max_retries=1))
def dies_once(counter: str, how: str) -> int:
    """Dies without a result on its first attempt (``how``: ``kill`` or ``exit``)."""
    path = Path(counter)
    attempt = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(attempt))
    if attempt == 1:
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(7)
    return attempt


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


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("kill", "The step process was killed by SIGKILL before reporting its result."),
        ("exit", "The step process exited with code 7 before reporting its result."),
    ],
)
def test_a_step_process_that_dies_without_its_result_is_retried(
    process_workspace: Workspace, tmp_path: Path, how: str, reason: str
) -> None:
    @pipeline
    def p() -> None:
        dies_once(counter=str(tmp_path / "attempts"), how=how)

    run = p.run_in(process_workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    page = PageRequest(sort="asc", size=10)
    attempts = process_workspace.store.steps.list(StepRunFilter(run_id=run.id), page).items
    assert [(a.attempt, a.status) for a in attempts] == [
        (1, ExecutionStatus.RETRYING),
        (2, ExecutionStatus.COMPLETED),
    ]
    assert attempts[0].status_reason == reason  # not 'Heartbeat lost': no beat was missed
