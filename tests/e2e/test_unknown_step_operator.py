"""A step naming a step operator the active stack lacks: a static pipeline's run is refused
before anything is recorded; a dynamic pipeline's step fails with that one-line reason."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import steps_lib
from tests.e2e.test_isolated import make_stack, steps
from wharf import RunFailedError, pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import InputError
from wharf.sdk.workspace import Workspace

ASKS = "Step 'whoami' asks for step operator 'nonexistent', which is not in the active stack"
STACKS = {
    "local": ("local", {}, "(it has no step operator)."),
    "procs": ("local_process", {}, "(it has no step operator)."),
    "with_op": ("local", {"step_operator": "subproc"}, "(its step operator is 'subproc')."),
}


@pytest.fixture(params=sorted(STACKS))
def stack(
    request: pytest.FixtureRequest, wharf_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Workspace, str]]:
    """A workspace whose active stack is one of :data:`STACKS`; the reason's stack part."""
    orchestrator, extra, has = STACKS[request.param]
    monkeypatch.setenv("WHARF_ACTIVE_STACK", request.param)
    ws = Workspace.open(load_config())
    make_stack(ws, request.param, orchestrator, **extra)
    yield ws, has
    ws.close()


def test_a_static_run_is_refused_before_it_is_recorded(stack: tuple[Workspace, str]) -> None:
    ws, has = stack
    remote = steps_lib.whoami.with_options(step_operator="nonexistent")

    @pipeline
    def p() -> None:
        remote(label="op")

    with pytest.raises(InputError) as refused:
        p.run_in(ws)
    assert str(refused.value) == f"{ASKS} {has}"
    assert ws.store.runs.list().total == 0


def test_a_dynamic_step_fails_with_the_reason_and_no_traceback(
    stack: tuple[Workspace, str], caplog: pytest.LogCaptureFixture
) -> None:
    ws, has = stack
    remote = steps_lib.whoami.with_options(step_operator="nonexistent")

    @pipeline(dynamic=True)
    def p() -> None:
        remote(label="op")

    with caplog.at_level(logging.INFO, logger="wharf"), pytest.raises(RunFailedError) as failed:
        p.run_in(ws)
    run = failed.value.run
    step = steps(ws, run.id)["whoami"]
    assert run.status is ExecutionStatus.FAILED
    assert step.status is ExecutionStatus.FAILED
    assert step.status_reason == f"{ASKS} {has}"
    assert step.pid is None and step.start_time is None  # it never started
    engine = [r for r in caplog.records if r.name.startswith("wharf.execution")]
    assert not [r.getMessage() for r in engine if r.exc_info or "Internal error" in r.getMessage()]
