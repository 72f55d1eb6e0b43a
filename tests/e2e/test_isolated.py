"""Isolated steps in their own processes: logs, faults, graceful and forced stops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import steps_lib
from wharf import Client, RunFailedError, pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import ComponentCreate, PageRequest, StepRunFilter

ASC = PageRequest(sort="asc")


def make_stack(workspace: Workspace, name: str, orchestrator: str, **extra) -> None:
    stacks = workspace.store.stacks
    orch = stacks.create_component(
        ComponentCreate(
            name=name,
            type=ComponentType.ORCHESTRATOR,
            flavor=orchestrator,
            configuration=extra.pop("orchestrator_config", {}),
        )
    )
    store = stacks.create_component(
        ComponentCreate(
            name=name,
            type=ComponentType.ARTIFACT_STORE,
            flavor="local",
            configuration={"path": str(workspace.config.artifact_root)},
        )
    )
    components = {ComponentType.ORCHESTRATOR: orch.id, ComponentType.ARTIFACT_STORE: store.id}
    if "step_operator" in extra:
        op = stacks.create_component(
            ComponentCreate(
                name=extra["step_operator"],
                type=ComponentType.STEP_OPERATOR,
                flavor="local_process",
            )
        )
        components[ComponentType.STEP_OPERATOR] = op.id
    stacks.create_stack(name, components)


@pytest.fixture
def process_workspace(wharf_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    ws = Workspace.open(load_config())
    make_stack(ws, "procs", "local_process")
    yield ws
    ws.close()


def steps(workspace: Workspace, run_id) -> dict:
    return {s.name: s for s in workspace.store.steps.list(StepRunFilter(run_id=run_id), ASC).items}


def test_static_pipeline_runs_every_step_in_its_own_process(process_workspace: Workspace):
    @pipeline
    def p() -> None:
        first = steps_lib.whoami(label="a")
        steps_lib.double(first)

    run = p.run_in(process_workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    found = steps(process_workspace, run.id)
    pid = Client(process_workspace.config, process_workspace.store).load_step_output(
        run.id, "whoami"
    )
    assert pid != os.getpid() and found["whoami"].pid == pid
    assert found["double"].pid not in (None, os.getpid(), pid)
    assert found["whoami"].spec is not None


def test_logs_are_captured_and_shown(process_workspace: Workspace):
    @pipeline
    def p() -> None:
        steps_lib.whoami(label="logging-step")

    run = p.run_in(process_workspace)
    step = steps(process_workspace, run.id)["whoami"]
    client = Client(process_workspace.config, process_workspace.store)
    assert "hello from logging-step" in client.step_logs(step.id)
    shown = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", "steps", "logs", str(step.id)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "hello from logging-step" in shown.stdout


def test_inline_step_logs_are_captured(workspace: Workspace):
    @pipeline
    def p() -> None:
        steps_lib.whoami(label="inline-step")

    run = p.run_in(workspace)
    step = steps(workspace, run.id)["whoami"]
    text = Client(workspace.config, workspace.store).step_logs(step.id)
    assert "hello from inline-step" in text


def test_sigkill_ends_saying_the_process_was_killed(process_workspace: Workspace):
    @pipeline
    def p() -> None:
        steps_lib.self_kill()

    with pytest.raises(RunFailedError) as failed:
        p.run_in(process_workspace)
    run = failed.value.run
    step = steps(process_workspace, run.id)["self_kill"]
    assert step.status is ExecutionStatus.FAILED
    assert step.status_reason == (
        "The step process was killed by SIGKILL before reporting its result."
    )  # not 'Heartbeat lost: …': its process was seen to end, no beat was missed
    assert run.status is ExecutionStatus.FAILED


def test_exit_without_reporting(process_workspace: Workspace):
    @pipeline
    def p() -> None:
        steps_lib.exit_without_reporting(code=7)

    with pytest.raises(RunFailedError) as failed:
        p.run_in(process_workspace)
    run = failed.value.run
    step = steps(process_workspace, run.id)["exit_without_reporting"]
    assert step.status is ExecutionStatus.FAILED
    assert step.status_reason == "The step process exited with code 7 before reporting its result."


def test_unserialisable_output_in_a_process(process_workspace: Workspace):
    @pipeline
    def p() -> None:
        steps_lib.unserialisable()

    with pytest.raises(RunFailedError) as failed:
        p.run_in(process_workspace)
    run = failed.value.run
    step = steps(process_workspace, run.id)["unserialisable"]
    assert step.status is ExecutionStatus.FAILED
    assert "lock" in step.status_reason.lower()


def test_process_that_cannot_start(wharf_home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "broken")
    ws = Workspace.open(load_config())
    make_stack(
        ws,
        "broken",
        "local_process",
        orchestrator_config={"python": str(wharf_home / "no-such-python")},
    )

    @pipeline
    def p() -> None:
        steps_lib.whoami()

    try:
        with pytest.raises(RunFailedError) as failed:
            p.run_in(ws)
        run = failed.value.run
        step = steps(ws, run.id)["whoami"]
    finally:
        ws.close()
    assert step.status is ExecutionStatus.FAILED
    assert "could not start" in step.status_reason
    assert run.status is ExecutionStatus.FAILED


def test_retries_across_processes(process_workspace: Workspace, tmp_path: Path):
    from wharf import RetryConfig

    flaky = steps_lib.file_flaky.with_options(retry=RetryConfig(max_retries=2))

    @pipeline
    def p() -> None:
        flaky(counter=str(tmp_path / "count"), failures=1)

    run = p.run_in(process_workspace)
    attempts = process_workspace.store.steps.list(StepRunFilter(run_id=run.id), ASC).items
    assert [(a.attempt, a.status) for a in attempts] == [
        (1, ExecutionStatus.RETRYING),
        (2, ExecutionStatus.COMPLETED),
    ]


@pytest.mark.parametrize("isolated", [True, False])
def test_graceful_stop_interrupts_running_steps(
    isolated: bool, wharf_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    ws = Workspace.open(load_config())
    if isolated:
        make_stack(ws, "procs", "local_process")
        ws.config = load_config(active_stack="procs")
    marker = tmp_path / "cleanup"

    @pipeline
    def p() -> None:
        first = steps_lib.stop_own_run_then_wait(marker=str(marker))
        steps_lib.double(first)

    try:
        run = p.run_in(ws)
        found = steps(ws, run.id)
    finally:
        ws.close()
    assert run.status is ExecutionStatus.STOPPED
    step = found["stop_own_run_then_wait"]
    assert step.status is ExecutionStatus.STOPPED, step.status_reason
    assert marker.read_text() == "cleaned up"  # finally blocks ran
    assert "double" not in found


def test_force_stop_kills_isolated_processes(process_workspace: Workspace, tmp_path: Path):
    marker = tmp_path / "cleanup"

    @pipeline
    def p() -> None:
        steps_lib.stop_own_run_then_wait(marker=str(marker), force=True, stubborn=True)

    run = p.run_in(process_workspace)
    step = steps(process_workspace, run.id)["stop_own_run_then_wait"]
    assert run.status is ExecutionStatus.STOPPED
    assert step.status is ExecutionStatus.STOPPED
    assert step.status_reason == "Force-stopped on request."  # killed at once: no grace
    assert not marker.exists()  # killed: no cleanup ran


def test_step_operator_isolates_a_step(wharf_home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "with_op")
    ws = Workspace.open(load_config())
    make_stack(ws, "with_op", "local", step_operator="subproc")
    remote = steps_lib.whoami.with_options(step_operator="subproc")

    @pipeline
    def p() -> None:
        remote(label="op")
        steps_lib.whoami(label="local", id="local")

    try:
        run = p.run_in(ws)
        client = Client(ws.config, ws.store)
        remote_pid = client.load_step_output(run.id, "whoami")
        local_pid = client.load_step_output(run.id, "local")
    finally:
        ws.close()
    assert run.status is ExecutionStatus.COMPLETED
    assert remote_pid != os.getpid() and local_pid == os.getpid()


def test_runs_show_stopped_run_json(process_workspace: Workspace, tmp_path: Path):
    """A stopped run can be inspected like any other."""

    @pipeline
    def p() -> None:
        steps_lib.stop_own_run_then_wait(marker=str(tmp_path / "m"))

    run = p.run_in(process_workspace)
    shown = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", "runs", "show", str(run.id), "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(shown.stdout)
    assert data["status"] == "stopped" and data["steps"][0]["status"] == "stopped"


def test_hung_step_is_failed_when_its_heartbeat_is_lost(process_workspace: Workspace):
    """The process is alive but silent: the lost-heartbeat sweep fails the step and the
    orchestrator ends the process; the run follows its execution mode."""

    @pipeline
    def p() -> None:
        frozen = steps_lib.freeze()
        steps_lib.double(frozen)

    with pytest.raises(RunFailedError) as failed:
        p.run_in(process_workspace)
    run = failed.value.run
    found = steps(process_workspace, run.id)
    step = found["freeze"]
    assert step.status is ExecutionStatus.FAILED
    assert step.status_reason.startswith("Heartbeat lost")
    assert "double" not in found
    assert run.status is ExecutionStatus.FAILED
