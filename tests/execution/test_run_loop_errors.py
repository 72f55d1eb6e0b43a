"""The run loop's own failure (an internal error, not a step's): the run ends failed and no step
is left in flight (a real workspace and run; the error is injected in the progress reporter,
which the loop calls once a step run is recorded running)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FakeClock
from tests.e2e import steps_lib
from tests.e2e.conftest import FakeSleep
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus as S
from wharf.execution.progress import ProgressReporter
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter


class InternalError(BaseException):
    """Not an ``Exception``: nothing below the run loop handles it."""


@pytest.fixture
def workspace(tmp_path: Path, clock: FakeClock) -> Iterator[Workspace]:
    ws = Workspace.open(load_config({}, home=tmp_path / "home"))
    ws.clock = clock
    ws.sleep = FakeSleep(clock)
    yield ws
    ws.close()


@pipeline
def chain(value: int = 1) -> None:
    steps_lib.double(steps_lib.produce(value=value))


def test_an_internal_error_ends_the_steps_in_flight_failed_with_the_runs_reason(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise InternalError("the reporter broke")

    monkeypatch.setattr(ProgressReporter, "step_started", broken)
    with pytest.raises(InternalError):
        chain.run_in(workspace)
    (run,) = workspace.store.runs.list().items
    assert run.status is S.FAILED
    assert run.status_reason is not None and "the reporter broke" in run.status_reason
    steps = workspace.store.steps.list(StepRunFilter(run_id=run.id), PageRequest()).items
    assert [(s.name, s.status, s.status_reason) for s in steps] == [
        ("produce", S.FAILED, run.status_reason)
    ]
    assert steps[0].end_time is not None
