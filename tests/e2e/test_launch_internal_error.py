"""An unexpected error in the engine once a step run is recorded running, before the step
ends (a failing collaborator of the launcher), ends that step run failed with a one-line
reason (the error's type and message) and logs the traceback once, instead of leaving the
step run running for good while its run ends failed.

No real component of Wharf raises in that window on demand, so the error comes from a
collaborator injected through a public seam: the run's progress reporter
(``RunServices.progress``, told of each step as it starts) gets a listener that raises when
a step starts, i.e. after the step run was recorded running and before its code runs. The
workspace hands it to the run through ``run_services``, the one place a run's services come
from; everything else (pipeline, orchestrator, launcher, store) is the real thing.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import steps_lib
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.execution.progress import ProgressEvent, ProgressReporter
from wharf.execution.services import RunServices
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunFilter

REASON = "Internal error: RuntimeError: the progress display broke"


def _raise_when_a_step_starts(event: ProgressEvent) -> None:
    if event.event == "step_started":
        raise RuntimeError("the progress display broke\n(a second line never shown)")


class BrokenProgressWorkspace(Workspace):
    """A workspace whose runs report progress to a listener that raises when a step starts."""

    def run_services(self, artifact_store: Any) -> RunServices:
        services = super().run_services(artifact_store)
        return dataclasses.replace(services, progress=ProgressReporter([_raise_when_a_step_starts]))


@pytest.fixture
def workspace(wharf_home: Path) -> Iterator[Workspace]:
    ws = BrokenProgressWorkspace.open(load_config())
    yield ws
    ws.close()


@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_a_step_whose_launch_raises_ends_failed_with_the_reason(
    workspace: Workspace, dynamic: bool, caplog: pytest.LogCaptureFixture
) -> None:
    @pipeline(dynamic=dynamic, raise_on_failure=False, enable_cache=False)
    def p() -> None:
        steps_lib.produce(value=3)

    with caplog.at_level(logging.INFO, logger="wharf"):
        run = p.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    steps = workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
    assert [(s.name, s.status, s.status_reason) for s in steps] == [
        ("produce", ExecutionStatus.FAILED, REASON)
    ]
    tracebacks = [r for r in caplog.records if r.exc_info is not None]
    assert len(tracebacks) == 1, [r.getMessage() for r in tracebacks]
    assert REASON in tracebacks[0].getMessage()
