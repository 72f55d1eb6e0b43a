"""Outages the engine rides out, with real processes: a Resource Manager killed (SIGKILL) and
started again on the same port while steps wait for and hold resources, and a workspace server
killed for some seconds while an isolated step runs. Every run completes, and no request is left
pending or allocated once its run ended.

Team mode (:mod:`tests.e2e.team`): the SDK talks to a workspace server, which talks to a
Resource Manager service, both real ``wharf … serve`` processes on PostgreSQL.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _server
from tests.e2e import steps_lib
from tests.e2e.team import Team, start_team
from tests.e2e.test_isolated import make_stack
from tests.waiting import wait_for
from wharf import ResourceSettings, RunFailedError, pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.resource_manager.contract.models import PageRequest as RMPageRequest
from wharf.resource_manager.contract.models import RequestFilter
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, PipelineRunRecord, StepRunFilter, StepRunRecord

ASC = PageRequest(sort="asc", size=1000)
LICENSE = ResourceSettings(resources={"license": 1})
HELD = (ResourceRequestStatus.PENDING, ResourceRequestStatus.ALLOCATED)
RM_OUTAGE_SECONDS = {"default": 4.0, "short": 8.0}
"""Per heartbeat: longer than the server's own retries of a call to the RM (a few tenths of a
second) and than a waiter's first polls (1 s, 2 s); at the short heartbeat also than a holder's
lease (6 s: the RM does not count its downtime against holders, which that case shows), and
shorter than the lease at the default one (76 s)."""
CREATION_RETRIED = "Could not create step run hold_license"
"""The engine's log of a creation of the step that failed: the workspace server answered 503
once its patience for the request's creation (``CREATE_PATIENCE_SECONDS``, 10 s) ran out."""
SERVER_OUTAGE_SECONDS = 6.0
"""The workspace server's outage: the step ends a third of the way in, and the rest (4 s, and
the restart) outlasts its end, so its process's first tries to record its result fail; with
the restart it is longer than a heartbeat interval, so the orchestrating process's check of
the step (once an interval) meets it too."""
SERVER_HEARTBEAT_SECONDS = 5.0
"""Liveness timeout 26 s: the outage, the restart and the step process's last backoff before
it records its result (5 s at most) cost the run no beat it needs."""
PATIENCE = 60.0
"""Seconds a test waits for a step to start or queue, on a loaded machine."""


@pytest.fixture(scope="module")
def _team(tmp_path_factory: pytest.TempPathFactory, _servers: dict[str, Any]) -> Iterator[Team]:
    """One team for the module (starting one costs seconds); each test leaves it serving."""
    server = _server(_servers, "postgresql")
    urls = [server.create().render_as_string(hide_password=False) for _ in range(2)]
    started = start_team(urls[0], urls[1], tmp_path_factory.mktemp("team"))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def team(_team: Team, wharf_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Team]:
    """The module's team, its workspace server as this test's store; both services serving
    again after the test, whatever it killed."""
    for name, value in _team.user_env().items():
        monkeypatch.setenv(name, value)
    try:
        yield _team
    finally:
        for service in (_team.resource_manager, _team.server):
            if service.process is None:
                service.start()


def outage(seconds: float, run: threading.Thread) -> None:
    """Let the outage last ``seconds``, checking that the run goes on meanwhile."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        assert run.is_alive(), "the run ended during the outage"
        time.sleep(0.1)


def steps_of(ws: Workspace, run_id: Any) -> dict[str, StepRunRecord]:
    return {s.name: s for s in ws.store.steps.list(StepRunFilter(run_id=run_id), ASC).items}


def queued_with_request(ws: Workspace, name: str) -> list[StepRunRecord]:
    """The steps called ``name`` that are queued with a request."""
    found = ws.store.steps.list(StepRunFilter(status=ExecutionStatus.QUEUED), ASC).items
    return [s for s in found if s.name == name and s.resource_request_id is not None]


def assert_nothing_held(team: Team, run: PipelineRunRecord) -> None:
    """No request of the finished ``run`` is pending or allocated."""
    with team.rm_client() as rm:
        query = RequestFilter(metadata={"pipeline_run_id": str(run.id)})
        requests = rm.requests.list(query, RMPageRequest(size=100)).items
    assert requests, "the run made no request"
    held = [(r.metadata.get("step_name"), r.status.value) for r in requests if r.status in HELD]
    assert held == [], f"requests left to a finished run: {held}"


def run_in_thread(p: Any, ws: Workspace) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["run"] = p.run_in(ws)
        except RunFailedError as exc:
            result["run"] = exc.run
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread, result


def finished(thread: threading.Thread, result: dict[str, Any]) -> PipelineRunRecord:
    thread.join(120)
    assert not thread.is_alive(), "the run did not end"
    if "error" in result:
        raise result["error"]
    run: PipelineRunRecord = result["run"]
    return run


@pytest.mark.parametrize("heartbeat", ["default", "short"])
def test_steps_waiting_and_holding_ride_out_a_resource_manager_restart(
    team: Team, heartbeat: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One step holds the only licence, another waits for it; the RM is killed and started
    again. The waiter keeps waiting (its polls meet the outage), the holder keeps its lease
    (at the short heartbeat it would have lapsed during the outage), both complete, and the
    run's requests are all released."""
    if heartbeat == "default":
        monkeypatch.delenv("WHARF_HEARTBEAT_INTERVAL", raising=False)  # 15 s
    else:
        monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "1")  # lease 6 s
    ws = Workspace.open(load_config())
    try:
        with team.rm_client() as rm:
            ensure_pool(rm, "licenses", {"license": 1}, account=ws.user.name)
        started, release = tmp_path / "started", tmp_path / "release"
        holder = steps_lib.wait_for_file.with_options(settings={"resources": LICENSE})
        waiter = steps_lib.hold_license.with_options(settings={"resources": LICENSE})

        @pipeline(dynamic=True)
        def p() -> None:
            held = holder.submit(path=str(release), started=str(started))
            wait_for(started.exists, "the holder to start", PATIENCE)
            waiting = waiter.submit(label="w", seconds=0)
            waiting.wait()
            held.wait()

        thread, result = run_in_thread(p, ws)
        wait_for(lambda: queued_with_request(ws, "hold_license"), "the waiter to queue", PATIENCE)
        team.resource_manager.stop()  # SIGKILL
        outage(RM_OUTAGE_SECONDS[heartbeat], thread)
        team.resource_manager.start()
        release.write_text("go")
        run = finished(thread, result)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        found = steps_of(ws, run.id)
        assert {n: s.status for n, s in found.items()} == {
            "wait_for_file": ExecutionStatus.COMPLETED,
            "hold_license": ExecutionStatus.COMPLETED,
        }
        assert_nothing_held(team, run)
    finally:
        ws.close()


def test_a_step_created_while_the_resource_manager_restarts_gets_its_request(
    team: Team, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The RM is down when a step asking for resources is created, for longer than the
    workspace server waits for it: the server answers 503 without writing the step (the RM
    comes back once the engine logged that failure), the engine retries its creation through
    the restart (its patience: the liveness timeout at a 3 s heartbeat, 16 s), and the step and
    run complete."""
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "3")
    caplog.set_level(logging.INFO, logger="wharf.execution")
    ws = Workspace.open(load_config())
    try:
        with team.rm_client() as rm:
            ensure_pool(rm, "licenses", {"license": 1}, account=ws.user.name)
        step = steps_lib.hold_license.with_options(settings={"resources": LICENSE})

        @pipeline
        def p() -> None:
            step(label="created during the outage", seconds=0)

        team.resource_manager.stop()  # SIGKILL
        thread, result = run_in_thread(p, ws)

        def creation_failed() -> bool:
            assert thread.is_alive(), "the run ended during the outage"
            return any(r.getMessage().startswith(CREATION_RETRIED) for r in caplog.records)

        wait_for(creation_failed, "the step's creation to fail", PATIENCE)
        team.resource_manager.start()
        run = finished(thread, result)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        assert steps_of(ws, run.id)["hold_license"].status is ExecutionStatus.COMPLETED
        assert_nothing_held(team, run)
    finally:
        ws.close()


def test_a_wait_that_times_out_during_an_outage_ends_its_step_and_its_request(
    team: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waiter gives up at its allocation timeout, which passes while the RM is down: the
    step ends failed saying so, and once the RM is back its request is released, so the
    licence never goes to the ended run."""
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "3")
    ws = Workspace.open(load_config())
    try:
        with team.rm_client() as rm:
            ensure_pool(rm, "licenses", {"license": 1}, account=ws.user.name)
        started, release = tmp_path / "started", tmp_path / "release"
        holder = steps_lib.wait_for_file.with_options(settings={"resources": LICENSE})
        impatient = ResourceSettings(resources={"license": 1}, allocation_wait_timeout_seconds=4)
        waiter = steps_lib.hold_license.with_options(settings={"resources": impatient})

        @pipeline(dynamic=True, execution_mode="continue_on_failure")
        def p() -> None:
            held = holder.submit(path=str(release), started=str(started))
            wait_for(started.exists, "the holder to start", PATIENCE)
            waiting = waiter.submit(label="w", seconds=0)
            try:
                waiting.wait()
            finally:
                held.wait()

        thread, result = run_in_thread(p, ws)
        wait_for(lambda: queued_with_request(ws, "hold_license"), "the waiter to queue", PATIENCE)
        team.resource_manager.stop()  # SIGKILL
        wait_for(
            lambda: not queued_with_request(ws, "hold_license"), "the waiter to give up", timeout=30
        )
        team.resource_manager.start()
        release.write_text("go")
        run = finished(thread, result)
        assert run.status is ExecutionStatus.FAILED
        found = steps_of(ws, run.id)
        assert found["wait_for_file"].status is ExecutionStatus.COMPLETED
        waited = found["hold_license"]
        assert waited.status is ExecutionStatus.FAILED
        assert "Timed out after 4 seconds" in (waited.status_reason or "")
        assert_nothing_held(team, run)
    finally:
        ws.close()


def test_an_isolated_step_and_its_run_ride_out_a_workspace_server_outage(
    team: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workspace server is killed while an isolated step runs and comes back some seconds
    later. The step ends during the outage: its process records its result once the server is
    back, the orchestrating process keeps waiting for it meanwhile, the downstream step runs and
    the run completes."""
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", str(SERVER_HEARTBEAT_SECONDS))
    ws = Workspace.open(load_config())
    try:
        make_stack(ws, "procs", "local_process")
        ws.config = load_config(active_stack="procs")
        started, release = tmp_path / "started", tmp_path / "release"

        @pipeline
        def p() -> None:
            steps_lib.double(steps_lib.wait_for_file(path=str(release), started=str(started)))

        thread, result = run_in_thread(p, ws)
        wait_for(started.exists, "the isolated step to start", PATIENCE)
        team.server.stop()  # SIGKILL
        outage(SERVER_OUTAGE_SECONDS / 3, thread)
        release.write_text("go")  # the step ends while the server is down
        outage(SERVER_OUTAGE_SECONDS * 2 / 3, thread)
        team.server.start()
        run = finished(thread, result)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        found = steps_of(ws, run.id)
        assert {n: s.status for n, s in found.items()} == {
            "wait_for_file": ExecutionStatus.COMPLETED,
            "double": ExecutionStatus.COMPLETED,
        }
    finally:
        ws.close()
