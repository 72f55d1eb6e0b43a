"""Resources taken back from steps, end to end with real processes, in both modes
(:mod:`tests.e2e.resource_modes`): a higher-priority pipeline reclaims a licence, an admin ends
requests, the Resource Manager is unreachable during heartbeats, a forced stop releases the
step's request; and a step's request names only the component that launches it. The team-mode
tests share one team (``shared_mode``), the outage test stopping and restarting its Resource
Manager.
"""

from __future__ import annotations

import contextlib
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import steps_lib
from tests.e2e.resource_modes import (
    ASC,
    LICENSE,
    Mode,
    _module_team,
    assert_no_holder_stretch,
    mode_workspace,
    shared_mode,
    steps,
)
from tests.e2e.team import Team
from tests.e2e.test_isolated import make_stack
from tests.resource_beds import contended_pool
from tests.waiting import wait_for, wait_until
from wharf import ResourceSettings, RetryConfig, RunFailedError, pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus, ResourceRequestStatus
from wharf.core.errors import EntityNotFoundError
from wharf.resource_manager.contract.models import ResourceRequestInfo
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunFilter, StepRunRecord

__all__ = ["_module_team", "mode_workspace", "shared_mode"]  # the fixtures


def _contended_pool(mode: Mode, workspace: Workspace, reclaimable: str) -> None:
    """One licence; the 'high' pipeline's policy outranks the 'low' one's (set up through the
    mode's Resource Manager)."""
    rm = mode.rm(workspace)
    try:
        # A shared team's, from earlier tests: this pool's policies, and the one admitting the
        # user to the other tests' licence (where the low step would take a licence of its own).
        for name in ("shared-low", "shared-high", f"licenses-{workspace.user.name}"):
            with contextlib.suppress(EntityNotFoundError):
                rm.policies.delete(name)
        contended_pool(workspace, reclaimable, rm)
    finally:
        if mode.team is not None:
            rm.close()


def _step(workspace: Workspace, name: str, status: ExecutionStatus) -> StepRunRecord | None:
    """The step run named ``name`` in ``status`` that holds a resource request, if any."""
    for record in workspace.store.steps.list(StepRunFilter(status=status), ASC).items:
        if record.name == name and record.resource_request_id is not None:
            return record
    return None


def _high_waits_and_low_keeps_running(mode: Mode) -> None:
    """The tolerance-none case before the low step is released: the high step's request waits
    at the Resource Manager (its scheduler has weighed it and left it pending), and two of the
    low step's renewals come after that decision, so a reclaim of the low step's licence would
    have reached the step (cancelling it) by now; the low step is still running."""
    ws = mode.open()
    rm = mode.rm(ws)
    try:

        def high_waiting() -> ResourceRequestInfo | None:
            queued = _step(ws, "hold_license", ExecutionStatus.QUEUED)
            if queued is None or queued.resource_request_id is None:
                return None
            request = rm.requests.get(queued.resource_request_id)
            waiting = request.status is ResourceRequestStatus.PENDING and request.status_reason
            return request if waiting else None

        high_request = wait_for(high_waiting, "the high step's request to wait", 30)
        low = _step(ws, "wait_for_file", ExecutionStatus.RUNNING)
        assert low is not None and low.resource_request_id is not None
        low_request_id = low.resource_request_id
        # Two renewals: a step's heartbeats follow one another, so by the second one the
        # first one's answer (cancelling the step, were its licence reclaimed) is in.
        for _ in range(2):
            before = rm.requests.get(low_request_id).renewed_at
            assert wait_until(
                lambda since=before: _renewed_since(rm.requests.get(low_request_id), since), 30
            ), "the low step's lease was not renewed"
        still = ws.store.steps.get(low.id)
        assert still.status is ExecutionStatus.RUNNING, still.status_reason
        assert rm.requests.get(high_request.id).status is ResourceRequestStatus.PENDING
    finally:
        if mode.team is not None:
            rm.close()
        ws.close()


def _renewed_since(request: ResourceRequestInfo, before: datetime | None) -> bool:
    """Whether ``request`` was renewed after ``before`` (its ``renewed_at`` as read then)."""
    return request.renewed_at is not None and (before is None or request.renewed_at > before)


@pytest.mark.parametrize("tolerance", ["coordinated", "none"])
def test_higher_priority_pipeline_reclaims(
    shared_mode: Mode, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tolerance: str
):
    mode = shared_mode
    monkeypatch.setenv("WHARF_ACTIVE_STACK", f"procs-{tolerance}")
    setup = mode.open()
    make_stack(setup, f"procs-{tolerance}", "local_process")
    # A tolerance-none request only goes to capacity that is never reclaimed.
    _contended_pool(mode, setup, "never" if tolerance == "none" else "coordinated")
    setup.close()
    release = tmp_path / "release"
    marker = tmp_path / "cleanup"
    low_step = steps_lib.wait_for_file.with_options(
        runtime="isolated",
        retry=RetryConfig(max_retries=1),
        settings={
            "resources": ResourceSettings(resources={"license": 1}, reclaim_tolerance=tolerance)
        },
    )
    high_step = steps_lib.hold_license.with_options(
        runtime="isolated", settings={"resources": LICENSE}
    )

    started = tmp_path / "started"

    @pipeline(name="low_pipe", dynamic=True)
    def low() -> None:
        low_step(path=str(release), marker=str(marker), started=str(started))

    @pipeline(name="high_pipe", dynamic=True)
    def high() -> None:
        high_step(label="high", seconds=0)

    results = {}

    def run(p, key):
        ws = mode.open()
        try:
            results[key] = (p.run_in(ws), ws)
            results[key + "_steps"] = steps(ws, results[key][0].id)
        finally:
            ws.close()

    low_thread = threading.Thread(target=run, args=(low, "low"))
    low_thread.start()
    deadline = time.monotonic() + 30
    check = mode.open()
    try:  # wait until the low step holds the licence and is inside its body (an interrupt
        # before it enters skips the body, and so its cleanup)
        while time.monotonic() < deadline:
            running = check.store.steps.list(
                StepRunFilter(status=ExecutionStatus.RUNNING), ASC
            ).items
            if running and started.exists():
                break
            time.sleep(0.05)
        else:
            pytest.fail("the low step never held the licence inside its body within 30 s")
    finally:
        check.close()
    high_thread = threading.Thread(target=run, args=(high, "high"))
    high_thread.start()
    if tolerance == "none":  # the high step waits; the low one is never interrupted
        _high_waits_and_low_keeps_running(mode)
        release.write_text("go")
    high_thread.join(60)
    release.write_text("go")
    low_thread.join(60)
    high_run = results["high"][0]
    low_run = results["low"][0]
    assert high_run.status is ExecutionStatus.COMPLETED, high_run.status_reason
    assert low_run.status is ExecutionStatus.COMPLETED, low_run.status_reason
    low_steps = results["low_steps"]
    if tolerance == "coordinated":
        assert [s.status for s in low_steps] == [
            ExecutionStatus.RETRYING,
            ExecutionStatus.COMPLETED,
        ]
        assert "resource request" in low_steps[0].status_reason
        assert marker.read_text().count("cleanup") == 2  # interrupted gracefully, then rerun
        assert low_steps[0].resource_request_id != low_steps[1].resource_request_id
    else:
        assert [s.status for s in low_steps] == [ExecutionStatus.COMPLETED]
        assert marker.read_text().count("cleanup") == 1


def test_admin_ending_requests_stops_waiting_and_running_steps(
    shared_mode: Mode, mode_workspace: Workspace, tmp_path: Path
):
    """An admin cancels a waiting step's request (the step fails, naming it) and releases a
    running step's request (the step is cancelled through its heartbeat, never failed)."""
    mode, rm_workspace = shared_mode, mode_workspace
    mode.ensure_pool(rm_workspace, "licenses", {"license": 1})
    rm = mode.rm(rm_workspace)
    started, release = tmp_path / "started", tmp_path / "release"
    holder = steps_lib.wait_for_file.with_options(settings={"resources": LICENSE})
    waiter = steps_lib.hold_license.with_options(settings={"resources": LICENSE})

    @pipeline(dynamic=True, execution_mode="continue_on_failure")
    def p() -> None:
        held = holder.submit(path=str(release), started=str(started))
        while not started.exists():
            time.sleep(0.02)
        waiting = waiter.submit(label="w")
        deadline = time.monotonic() + 30
        pending = []
        while time.monotonic() < deadline:
            pending = [
                r
                for r in rm_workspace.store.steps.list(StepRunFilter(), ASC).items
                if r.status is ExecutionStatus.QUEUED and r.resource_request_id
            ]
            if pending:
                break
            time.sleep(0.02)
        else:
            pytest.fail("the waiting step's request never showed queued within 30 s")
        rm.requests.cancel(pending[0].resource_request_id)
        running = next(
            r
            for r in rm_workspace.store.steps.list(StepRunFilter(), ASC).items
            if r.status is ExecutionStatus.RUNNING
        )
        rm.requests.release(running.resource_request_id)
        waiting.wait()
        held.wait()

    with pytest.raises(RunFailedError) as failed:
        p.run_in(rm_workspace)
    run = failed.value.run
    found = {r.name: r for r in steps(rm_workspace, run.id)}
    assert found["hold_license"].status is ExecutionStatus.FAILED
    assert "was cancelled" in found["hold_license"].status_reason
    assert found["wait_for_file"].status is ExecutionStatus.CANCELLED
    assert "released" in found["wait_for_file"].status_reason
    assert_no_holder_stretch(rm_workspace)


def test_a_run_whose_step_s_request_was_released_says_so_not_stopped_on_request(
    shared_mode: Mode, mode_workspace: Workspace, tmp_path: Path
):
    """Nobody asked the run to stop: its reason named no step ("Stopped on request.")."""
    mode, rm_workspace = shared_mode, mode_workspace
    mode.ensure_pool(rm_workspace, "licenses", {"license": 1})
    rm = mode.rm(rm_workspace)
    started, release = tmp_path / "started", tmp_path / "release"
    holder = steps_lib.wait_for_file.with_options(settings={"resources": LICENSE})

    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        held = holder.submit(path=str(release), started=str(started))
        while not started.exists():
            time.sleep(0.02)
        (running,) = [
            r
            for r in rm_workspace.store.steps.list(StepRunFilter(), ASC).items
            if r.status is ExecutionStatus.RUNNING
        ]
        rm.requests.release(running.resource_request_id)
        held.wait()

    run = p.run_in(rm_workspace)
    assert run.status is ExecutionStatus.STOPPED, run.status_reason
    reason = run.status_reason or ""
    assert reason.startswith("Step 'wait_for_file' cancelled: "), reason
    assert "Released" in reason and "Stopped on request" not in reason, reason


def test_resource_manager_unreachable_during_heartbeats(
    wharf_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _module_team: Team
) -> None:
    """Team mode: the Resource Manager goes away while a step holds its licence. Heartbeats
    still answer (the renewal is retried at the next beat), the step keeps running on its
    valid lease, and it completes normally once the Resource Manager is back."""
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "2")  # liveness, hence lease: 11 s
    team = _module_team
    try:
        for name, value in team.user_env().items():
            monkeypatch.setenv(name, value)
        mode = Mode("team", team)
        ws = mode.open()
        mode.ensure_pool(ws, "licenses", {"license": 1})
        started, release = tmp_path / "started", tmp_path / "release"
        holder = steps_lib.wait_for_file.with_options(settings={"resources": LICENSE})

        @pipeline(dynamic=True)
        def p() -> None:
            holder(path=str(release), started=str(started))

        result: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: result.update(run=p.run_in(ws)))
        thread.start()
        assert wait_until(started.exists, 60), "the step never started"
        holding = wait_for(
            lambda: _step(ws, "wait_for_file", ExecutionStatus.RUNNING), "the step's request"
        )
        request_id = holding.resource_request_id
        team.resource_manager.stop()
        # Two heartbeats find the Resource Manager gone: the server logs each failed renewal.
        failed = f"Could not renew the lease of request {request_id}"
        assert wait_until(
            lambda: team.server.log_file.read_text(errors="replace").count(failed) >= 2, 60, 0.2
        ), team.server.log()
        running = ws.store.steps.list(StepRunFilter(status=ExecutionStatus.RUNNING), ASC).items
        assert [s.name for s in running] == ["wait_for_file"]
        team.resource_manager.start()
        with team.rm_client() as rm:  # a heartbeat renews the lease again
            before = rm.requests.get(request_id).renewed_at  # read after the restart: a later
            # renewal is one of the restarted Resource Manager's
            assert wait_until(
                lambda: _renewed_since(rm.requests.get(request_id), before), 60, 0.2
            ), "the lease was not renewed after the restart"
        release.write_text("go")
        thread.join(60)
        run = result["run"]
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        record = steps(ws, run.id)[0]
        assert record.status is ExecutionStatus.COMPLETED
        with team.rm_client() as rm:
            request = rm.requests.get(record.resource_request_id)
        assert request.status is ResourceRequestStatus.RELEASED
        ws.close()
    finally:  # the module's other team-mode tests need it back
        if team.resource_manager.process is None:
            team.resource_manager.start()


def test_a_steps_request_names_only_the_component_that_launches_it(
    wharf_home: Path, monkeypatch: pytest.MonkeyPatch
):
    """The step operator is the subject of the steps it runs, the orchestrator of the others;
    no other stack component (the artifact store, the unused one) is a subject."""
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "with_op")
    ws = Workspace.open(load_config())
    try:
        make_stack(ws, "with_op", "local", step_operator="subproc")
        Mode("embedded").ensure_pool(ws, "licenses", {"license": 1})
        holder = steps_lib.hold_license.with_options(settings={"resources": LICENSE})

        @pipeline
        def p() -> None:
            holder.with_options(step_operator="subproc")(label="op", seconds=0, id="on_op")
            holder(label="here", seconds=0, id="inline")

        run = p.run_in(ws)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        rm = ws.resource_manager()
        ids = {
            type_.value: str(ws.store.stacks.get_component_by_name(type_, name).id)
            for type_, name in (
                (ComponentType.ORCHESTRATOR, "with_op"),
                (ComponentType.STEP_OPERATOR, "subproc"),
            )
        }
        named = {}
        for record in steps(ws, run.id):
            info = rm.requests.get(record.resource_request_id)
            named[record.name] = [
                (n.subject_id, n.attributes["component_type"])
                for chain in info.subjects
                for n in chain.nodes
                if n.subject_type.value == "component"
            ]
    finally:
        ws.close()
    assert named == {
        "on_op": [(ids["step_operator"], "step_operator")],
        "inline": [(ids["orchestrator"], "orchestrator")],
    }


@pytest.mark.parametrize("stack", ["default", "procs"])
def test_forced_stop_releases_the_steps_request(
    wharf_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stack: str
) -> None:
    """Embedded mode: a step holding a licence is stopped by force (its thread given up on, or
    its process killed); the step ends stopped and its request is released, not left to lapse."""
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    ws = Workspace.open(load_config())
    try:
        Mode("embedded").ensure_pool(ws, "licenses", {"license": 1})
        if stack == "procs":
            make_stack(ws, "procs", "local_process")
            ws.config = load_config(active_stack="procs")
        stubborn = steps_lib.stop_own_run_then_wait.with_options(settings={"resources": LICENSE})

        @pipeline
        def p() -> None:
            stubborn(marker=str(tmp_path / "m"), force=True, stubborn=stack == "procs")

        run = p.run_in(ws)
        assert run.status is ExecutionStatus.STOPPED, run.status_reason
        (step,) = steps(ws, run.id)
        assert step.status is ExecutionStatus.STOPPED, step.status_reason
        assert step.resource_request_id is not None
        request = ws.resource_manager().requests.get(step.resource_request_id)
        assert request.status is ResourceRequestStatus.RELEASED
        assert_no_holder_stretch(ws)
    finally:
        ws.close()
