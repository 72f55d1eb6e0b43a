"""Replicas, as production runs them: two ``wharf server serve`` processes on one PostgreSQL
database and two ``wharf resource-manager serve`` processes on another, each pair behind a
round-robin balancer (:mod:`tests.faults.balancer`), so a run's calls spread over both replicas
of each. A replica is killed with SIGKILL mid-run; the other one serves on, and the run
completes with every step's result and nothing left held at the Resource Manager.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import _server
from tests.e2e import steps_lib
from tests.e2e.team import ADMIN, ADMIN_PASSWORD, Service, free_port
from tests.e2e.test_isolated import make_stack
from tests.e2e.test_outages_engine import (
    LICENSE,
    PATIENCE,
    assert_nothing_held,
    finished,
    queued_with_request,
    run_in_thread,
    steps_of,
)
from tests.faults.balancer import Balancer
from tests.waiting import wait_for
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.resource_manager.client.http import HttpResourceManager
from wharf.resource_manager.contract.models import PageRequest as RMPageRequest
from wharf.resource_manager.contract.models import RequestFilter
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace

REPLICAS = 2


@dataclass
class Replicas:
    """Both pairs of replicas and their balancers; :attr:`token` is the workspace admin's."""

    servers: list[Service]
    resource_managers: list[Service]
    balancer: Balancer
    rm_balancer: Balancer
    rm_key: str
    token: str = ""

    def rm_client(self) -> HttpResourceManager:
        return HttpResourceManager(self.rm_balancer.url, api_key=self.rm_key)

    def server_at(self, upstream: str) -> Service:
        """The server replica listening at ``upstream`` (``host:port``)."""
        return self.servers[self.balancer.upstreams.index(upstream)]

    def stop(self) -> None:
        for service in (*self.servers, *self.resource_managers):
            service.stop()
        self.balancer.close()
        self.rm_balancer.close()


def _replicas(workdir: Path, rm_url: str, server_url: str) -> Replicas:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(workdir / "service-home")
    rm_key, rm_secret = "rm-admin-" + secrets.token_urlsafe(24), secrets.token_urlsafe(48)
    server_secret = secrets.token_urlsafe(48)  # the replicas share it, as they share tokens
    rm_ports = [free_port() for _ in range(REPLICAS)]
    server_ports = [free_port() for _ in range(REPLICAS)]
    rm_balancer = Balancer([f"127.0.0.1:{port}" for port in rm_ports])
    balancer = Balancer([f"127.0.0.1:{port}" for port in server_ports])
    rm_args = ["--db-url", rm_url, "--admin-api-key", rm_key, "--secret-key", rm_secret]
    rm_args += ["--sweep-interval", "0.5", "--log-level", "warning"]
    server_args = ["--db-url", server_url, "--secret-key", server_secret]
    server_args += ["--admin-username", ADMIN, "--admin-password", ADMIN_PASSWORD]
    server_args += ["--artifact-root", str(workdir / "shared-artifacts")]
    server_args += ["--resource-manager-url", rm_balancer.url]
    server_args += ["--resource-manager-token", rm_key, "--log-level", "warning"]
    replicas = Replicas(
        [
            Service(
                f"server {i}",
                ["server", "serve", "--port", str(port), *server_args],
                env,
                f"http://127.0.0.1:{port}/health",
                workdir / f"server-{i}.log",
            )
            for i, port in enumerate(server_ports)
        ],
        [
            Service(
                f"resource manager {i}",
                ["resource-manager", "serve", "--port", str(port), *rm_args],
                env,
                f"http://127.0.0.1:{port}/health",
                workdir / f"resource-manager-{i}.log",
            )
            for i, port in enumerate(rm_ports)
        ],
        balancer,
        rm_balancer,
        rm_key,
    )
    try:  # all at once: the replicas of each pair migrate and seed one database together
        services = (*replicas.resource_managers, *replicas.servers)
        for service in services:
            service.launch()
        for service in services:
            service.wait_until_healthy()
        login = httpx.post(
            f"{balancer.url}/api/v1/auth/login",
            json={"username": ADMIN, "password": ADMIN_PASSWORD},
            timeout=30,
        )
        login.raise_for_status()
        replicas.token = login.json()["access_token"]
    except BaseException:
        replicas.stop()
        raise
    return replicas


@pytest.fixture(scope="module")
def _replicas_module(
    tmp_path_factory: pytest.TempPathFactory, _servers: dict[str, Any]
) -> Iterator[Replicas]:
    server = _server(_servers, "postgresql")
    urls = [server.create().render_as_string(hide_password=False) for _ in range(2)]
    started = _replicas(tmp_path_factory.mktemp("replicas"), urls[0], urls[1])
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def replicas(
    _replicas_module: Replicas, wharf_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Replicas]:
    """The module's replicas, the server pair as this test's store; every replica serving
    again after the test, whatever it killed."""
    found = _replicas_module
    monkeypatch.setenv("WHARF_SERVER_URL", found.balancer.url)
    monkeypatch.setenv("WHARF_API_KEY", found.token)
    found.balancer.failures.clear()
    try:
        yield found
    finally:
        found.balancer.on_answered = found.rm_balancer.on_answered = None
        for service in (*found.resource_managers, *found.servers):
            if service.process is None:
                service.start()


def test_a_server_replica_killed_after_committing_a_steps_end_loses_nothing(
    replicas: Replicas, caplog: pytest.LogCaptureFixture
) -> None:
    """The replica that records the end of a step holding a licence is killed right after its
    commit, before its answer reaches the engine (which gets the balancer's 502). The engine's
    repeat reaches the other replica: it answers the end as recorded (no refusal, no second
    version), the request is released, the downstream step gets the output and the run
    completes without an error logged."""
    killed: list[str] = []

    def kill_after_the_end(method: str, path: str, upstream: str) -> bool:
        if method != "POST" or not path.endswith("/finish") or killed:
            return False
        killed.append(path)
        replicas.server_at(upstream).stop()  # SIGKILL
        return True

    caplog.set_level(logging.WARNING, logger="wharf")
    ws = Workspace.open(load_config())
    try:
        with replicas.rm_client() as rm:
            ensure_pool(rm, "licenses", {"license": 1}, account=ws.user.name)
        produce = steps_lib.produce.with_options(settings={"resources": LICENSE})

        @pipeline(enable_cache=False)
        def p() -> None:
            steps_lib.double(produce(value=3))

        replicas.balancer.on_answered = kill_after_the_end
        thread, result = run_in_thread(p, ws)
        run = finished(thread, result)
        assert killed, "no replica was killed"
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        found = steps_of(ws, run.id)
        assert {n: s.status for n, s in found.items()} == {
            "produce": ExecutionStatus.COMPLETED,
            "double": ExecutionStatus.COMPLETED,
        }
        assert ws.store.artifacts.get_version(found["double"].outputs["output"]) is not None
        step_calls = [f for f in replicas.balancer.failures if "/api/v1/steps" in f[1]]
        assert [f[2] for f in step_calls] == [502], step_calls  # the lost answer alone
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
        assert_nothing_held(replicas, run)  # type: ignore[arg-type]
    finally:
        ws.close()


def test_a_server_replica_killed_between_a_steps_request_and_its_write_leaves_no_orphan(
    replicas: Replicas,
) -> None:
    """The server replica creating a step is killed right after the RM made the step's request,
    before the step run is written. The engine repeats the creation at the other replica,
    which gets the same request back (keyed by the step run id): one request in all, and the
    step runs at once, rather than waiting behind an orphan request that held the only licence
    for nobody until its first lease (60 s) lapsed."""
    killed: list[str] = []

    def kill_the_creator(method: str, path: str, upstream: str) -> bool:
        if method != "POST" or path != "/v1/resource-requests" or killed:
            return False
        for server, calls in replicas.balancer.in_flight.items():
            if any(call.startswith("POST /api/v1/steps") for call in calls):
                killed.append(server)
                replicas.server_at(server).stop()  # SIGKILL
        return False

    ws = Workspace.open(load_config())
    try:
        with replicas.rm_client() as rm:
            ensure_pool(rm, "licenses", {"license": 1}, account=ws.user.name)
        step = steps_lib.hold_license.with_options(settings={"resources": LICENSE})

        @pipeline
        def p() -> None:
            step(label="created twice", seconds=0)

        replicas.rm_balancer.on_answered = kill_the_creator
        thread, result = run_in_thread(p, ws)
        run = finished(thread, result)
        assert len(killed) == 1, killed
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        assert run.end_time is not None and run.start_time is not None
        assert (run.end_time - run.start_time).total_seconds() < PATIENCE / 2
        with replicas.rm_client() as rm:
            query = RequestFilter(metadata={"pipeline_run_id": str(run.id)})
            made = rm.requests.list(query, RMPageRequest(size=100)).items
        assert [(r.metadata["step_name"], r.status) for r in made] == [
            ("hold_license", ResourceRequestStatus.RELEASED)
        ]
    finally:
        ws.close()


def test_runs_ride_out_a_server_and_a_resource_manager_replica_killed_mid_run(
    replicas: Replicas, tmp_path: Path
) -> None:
    """An isolated step holds the only licence, another waits for it; one server replica and
    then one RM replica are killed (and stay down). The run's calls go on at the other
    replicas: the holder's heartbeats renew its lease, the waiter gets the licence once the
    holder releases it, and the run completes with everything released."""
    ws = Workspace.open(load_config())
    try:
        make_stack(ws, "procs", "local_process")
        ws.config = load_config(active_stack="procs")
        with replicas.rm_client() as rm:
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
        replicas.servers[0].stop()  # SIGKILL
        replicas.resource_managers[0].stop()
        release.write_text("go")
        run = finished(thread, result)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        found = steps_of(ws, run.id)
        assert {n: s.status for n, s in found.items()} == {
            "wait_for_file": ExecutionStatus.COMPLETED,
            "hold_license": ExecutionStatus.COMPLETED,
        }
        assert_nothing_held(replicas, run)  # type: ignore[arg-type]
        assert min(replicas.balancer.served.values()) > 0  # both replicas served the run
    finally:
        ws.close()
