"""The workspace server's periodic lost-orchestrator sweep, on a real SQLite store and clock."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.conftest import World, sqlite_world
from wharf.core.enums import ExecutionStatus as S
from wharf.server.sweeper import LostRunSweeper
from wharf.store.models import OrchestratorProcess


@pytest.fixture
def store_world(tmp_path: Path) -> Iterator[World]:
    with sqlite_world(tmp_path) as world:
        yield world


def test_a_run_past_its_deadline_ends_failed_without_any_client(store_world: World) -> None:
    elsewhere = OrchestratorProcess(
        host="another-machine", pid=7, start="b:1", liveness_timeout_seconds=0.2
    )
    run = store_world.run(status=S.RUNNING, orchestrator=elsewhere)
    step = store_world.step(run.id)
    sweeper = LostRunSweeper(store_world.store, interval=0.05).start()
    try:
        deadline = time.monotonic() + 60
        while store_world.store.runs.get(run.id).status is S.RUNNING:
            assert time.monotonic() < deadline, "the sweep never ended the run"
            time.sleep(0.02)
    finally:
        sweeper.close()
    ended = store_world.store.runs.get(run.id)
    assert ended.status is S.FAILED
    assert (
        ended.status_reason == f"orchestrator lost (last seen {run.created:%Y-%m-%d %H:%M:%S} UTC)"
    )
    assert store_world.store.steps.get(step.id).status is S.FAILED
