"""A step's own process (``python -m wharf.execution.entrypoint ID``) that learns of a stop
before its code starts fetches nothing (``wharf.execution.code_fetch``): real processes, a
pipeline whose code travels in an archive (a ``local_process`` stack with ``code_travels``),
and a step process started by hand for a step run of a stopping run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import (
    PageRequest,
    RunCreate,
    RunUpdate,
    StepRunCreate,
    StepRunFilter,
)

STEPS = """
from wharf import step


@step(enable_cache=False)
def where() -> str:
    return __file__
"""

SCRIPT = """
from wharf import pipeline

from travelling_steps import where


@pipeline
def travelling():
    where()


if __name__ == "__main__":
    travelling()
"""

BOUND = 120  # seconds: a hang fails the test instead of blocking it


@pytest.fixture
def travels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A fresh home whose active stack runs each step as if on another machine."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "PYTHONPATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "travels")
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "30")  # no regular beat during the test
    ws = Workspace.open(load_config())
    make_stack(ws, "travels", "local_process", orchestrator_config={"code_travels": True})
    yield ws
    ws.close()


def test_a_step_process_of_a_stopping_run_fetches_no_code(
    travels: Workspace, tmp_path: Path
) -> None:
    """The run was asked to stop after the step run was created, before its process ran: the
    process's first beat (before the fetch) tells it, the step ends stopped, and the run's
    code archive is not downloaded nor unpacked."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "travelling_steps.py").write_text(STEPS)
    (project / "run.py").write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, "run.py"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    store = travels.store
    (first,) = store.runs.list(page=PageRequest()).items
    assert first.status is ExecutionStatus.COMPLETED, first.status_reason
    code = store.snapshots.get(first.snapshot_id).spec.code
    assert code is not None
    (ran,) = store.steps.list(StepRunFilter(run_id=first.id), PageRequest()).items

    # Another run of the same snapshot, its step run created, then the run asked to stop.
    run = store.runs.create(
        RunCreate(
            project_id=first.project_id,
            pipeline_id=first.pipeline_id,
            snapshot_id=first.snapshot_id,
            name="stopped-early",
            status=ExecutionStatus.RUNNING,
            orchestrator_run_id="by-hand",
            user_id=first.user_id,
        )
    )
    step = store.steps.create(
        StepRunCreate(run_id=run.id, name="where", status=ExecutionStatus.RUNNING, spec=ran.spec)
    )
    store.runs.update(run.id, RunUpdate(status=ExecutionStatus.STOPPING))
    cache = travels.config.code_cache
    shutil.rmtree(cache)  # as on a machine that never ran this code
    started = subprocess.run(
        [sys.executable, "-m", "wharf.execution.entrypoint", str(step.id)],
        cwd=tmp_path,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert started.returncode == 1, started.stderr
    ended = store.steps.get(step.id)
    assert ended.status is ExecutionStatus.STOPPED, (ended.status_reason, started.stderr)
    assert ended.status_reason == "Step was stopped on request (run stopping).", started.stderr
    assert not (cache / code.digest).exists(), started.stderr
    assert not cache.exists() or list(cache.iterdir()) == [], list(cache.iterdir())
