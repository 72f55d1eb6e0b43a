"""The lost-orchestrator sweep as callers run it: which runs it ends, from this machine's view
of the recorded processes (real processes, a real SQLite store)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.store.conftest import World, sqlite_world
from wharf.core.enums import ExecutionStatus as S
from wharf.store.lost_runs import sweep_lost_runs
from wharf.store.models import OrchestratorProcess
from wharf.store.process_identity import own_start_token, start_token, this_host

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with sqlite_world(tmp_path) as world:
        yield world


def process(pid: int, token: str | None, host: str | None = None) -> OrchestratorProcess:
    return OrchestratorProcess(
        host=host or this_host(), pid=pid, start=token, liveness_timeout_seconds=3600
    )


def test_what_a_sweep_ends(world: World) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    token = start_token(child.pid)
    assert token is not None
    child.communicate()  # it ends, and is reaped
    alive = world.run(status=S.RUNNING, orchestrator=process(os.getpid(), own_start_token()))
    dead = world.run(status=S.RUNNING, orchestrator=process(child.pid, token))
    remote = world.run(status=S.RUNNING, orchestrator=process(7, "b:1", "another-machine"))
    assert [r.run.id for r in sweep_lost_runs(world.store)] == [dead.id]
    assert world.store.runs.get(alive.id).status is S.RUNNING
    assert world.store.runs.get(remote.id).status is S.RUNNING
    # Hours later, without a beat: the remote run is lost, this process's run (alive, its
    # beats late) is spared.
    later = datetime.now(UTC) + timedelta(hours=2)
    assert [r.run.id for r in sweep_lost_runs(world.store, later)] == [remote.id]
    assert world.store.runs.get(alive.id).status is S.RUNNING


def test_a_swept_run_is_told_as_runs_logs_tells_how_a_run_ended(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """``Run 'NAME' ended failed: …``, the run's name quoted as everywhere else."""
    remote = world.run(status=S.RUNNING, orchestrator=process(7, "b:1", "another-machine"))
    later = datetime.now(UTC) + timedelta(hours=2)
    with caplog.at_level("WARNING", logger="wharf.store.lost_runs"):
        sweep_lost_runs(world.store, later)
    name = world.store.runs.get(remote.id).name
    told = [r.getMessage() for r in caplog.records if r.name == "wharf.store.lost_runs"]
    assert len(told) == 1
    assert told[0].startswith(f"Run '{name}' ended failed: orchestrator lost (last seen ")
