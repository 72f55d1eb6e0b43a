"""A run on the Kubernetes orchestrator rides out its workspace server gone for about 20 s.

The server is a real ``wharf server serve`` process (:class:`tests.e2e.team.Service`) on a
SQLite file of the test, with the admin's login token as the user's credential; the orchestrator
pod and the step pods (processes of the process kubelet) reach it with the run's token only.
While the step ``slow`` runs in its pod, ``first`` ends and the server is killed (SIGKILL) as
soon as the orchestrator pod created the pods of the three steps after ``first``: their
processes start with no server to talk to and must wait for it. ``slow`` ends during the
outage (its pod records its end once the server is back); the server starts again on the same
port and database 20 s after the kill, and the last step runs. The run completes, each step ran
exactly once (one step run, one pod), and no pod or Secret is left.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest

from tests.artifacts.s3_server import MotoServer
from tests.e2e.team import ADMIN, ADMIN_PASSWORD, Service, free_port
from tests.integrations.kubernetes.team_bed import open_user_bed
from tests.integrations.kubernetes.testbed import (
    NAMESPACE,
    Bed,
    attempts,
    orchestrator_logs,
    remaining_secrets,
    runner_script,
    start_script,
)
from tests.kube.emulator import Emulator
from tests.kube.emulator.resources import PODS
from tests.waiting import wait_for, wait_until
from wharf.core.enums import ExecutionStatus
from wharf.integrations.kubernetes.labels import STEP_KEY

OUTAGE_SECONDS = 20.0
HEARTBEAT_SECONDS = 10.0
"""Liveness timeout 51 s: the outage (and the restart) costs the run no beat it needs."""
BOUND = 120.0
"""Seconds the test waits for anything the run does, on a loaded machine."""
DOWNSTREAM = ("left", "middle", "right")

STEPS_MODULE = """
import time
from pathlib import Path

from wharf import pipeline, step


def hold(started: str, release: str) -> None:
    Path(started).write_text("running")
    while not Path(release).exists():
        time.sleep(0.05)


@step
def first(started: str, release: str) -> int:
    hold(started, release)
    return 1


@step
def slow(started: str, release: str) -> int:
    hold(started, release)
    return 10


@step
def left(value: int) -> int:
    return value + 1


@step
def middle(value: int) -> int:
    return value + 2


@step
def right(value: int) -> int:
    return value + 3


@step
def total(a: int, b: int, c: int, d: int) -> int:
    return a + b + c + d


@pipeline
def ride_out(paths: dict[str, str]) -> None:
    value = first(paths["first_started"], paths["first_release"])
    held = slow(paths["slow_started"], paths["slow_release"])
    total(left(value), middle(value), right(value), held)
"""


def server_service(tmp_path: Path) -> Service:
    """A workspace server on a free port and a SQLite file of ``tmp_path``, not started."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(tmp_path / "server-home")
    args = [
        "server",
        "serve",
        "--port",
        str(port),
        "--db-url",
        f"sqlite:///{tmp_path / 'server.db'}",
        "--secret-key",
        secrets.token_urlsafe(48),  # the same across the restart: tokens stay valid
        "--admin-username",
        ADMIN,
        "--admin-password",
        ADMIN_PASSWORD,
        "--log-level",
        "warning",
    ]
    return Service("workspace server", args, env, f"{url}/health", tmp_path / "server.log")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Service]:
    service = server_service(tmp_path)
    service.start()
    try:
        yield service
    finally:
        service.stop()


def server_url(service: Service) -> str:
    return service.health_url.removesuffix("/health")


def login(service: Service) -> str:
    answer = httpx.post(
        f"{server_url(service)}/api/v1/auth/login",
        json={"username": ADMIN, "password": ADMIN_PASSWORD},
        timeout=30,
    )
    answer.raise_for_status()
    token: str = answer.json()["access_token"]
    return token


@pytest.fixture
def bed(
    server: Service,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    s3_bucket: str,
) -> Iterator[Bed]:
    """The cluster, the project and the user's workspace on ``server`` (stack ``k8s``)."""
    user = {
        "WHARF_HOME": str(tmp_path / "home"),
        "WHARF_SERVER_URL": server_url(server),
        "WHARF_API_KEY": login(server),
        "WHARF_ACTIVE_STACK": "k8s",
        "WHARF_HEARTBEAT_INTERVAL": f"{HEARTBEAT_SECONDS:g}",
    }
    files = {"outage_steps.py": STEPS_MODULE, "run.py": runner_script("outage_steps")}
    with open_user_bed(user, tmp_path, monkeypatch, s3_server, s3_bucket, files) as opened:
        yield opened


def step_pods(bed: Bed) -> dict[str, list[dict[str, Any]]]:
    """The step pods created so far, by step name."""
    found: dict[str, list[dict[str, Any]]] = {}
    for pod in bed.seen.of_kind("Pod"):
        step = pod["metadata"].get("labels", {}).get(STEP_KEY)
        if step is not None:
            found.setdefault(step, []).append(pod)
    return found


def waited_for_the_server(bed: Bed, pod: dict[str, Any]) -> bool:
    """Whether the step pod's process found no server as it started and waited for it."""
    folder = bed.emulator.log_dir / NAMESPACE / pod["metadata"]["name"]
    logs = "".join(path.read_text(errors="replace") for path in folder.glob("*.log"))
    return "Could not read step run" in logs and "Managed to read step run" in logs


def nothing_running(emulator: Emulator) -> bool:
    """Every pod ended and no Secret is left (ended Jobs may stay: Kubernetes keeps them)."""
    pods = emulator.store.list(PODS, NAMESPACE)["items"]
    ended = all((p.get("status") or {}).get("phase") in ("Succeeded", "Failed") for p in pods)
    return ended and not remaining_secrets(emulator)


def finished(script: subprocess.Popen[str]) -> str:
    """The script's output once it ended (it must end within :data:`BOUND`)."""
    try:
        output, _ = script.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        script.kill()
        output, _ = script.communicate()
        raise AssertionError(f"the run's script did not end:\n{output}") from None
    return output


def test_a_run_rides_out_a_workspace_server_outage_with_step_pods_starting_during_it(
    bed: Bed, server: Service, tmp_path: Path
) -> None:
    """``slow`` runs throughout; once ``first`` ended, the server is killed as soon as the
    orchestrator pod created the pods of ``left``, ``middle`` and ``right`` (their processes
    then start with no server); ``slow`` ends during the outage; the server comes back after
    :data:`OUTAGE_SECONDS` and ``total`` runs after it."""
    paths = {
        f"{name}_{event}": str(tmp_path / f"{name}-{event}")
        for name in ("first", "slow")
        for event in ("started", "release")
    }
    script = start_script(bed, "ride_out", "k8s", paths=paths)
    try:
        for name in ("first", "slow"):
            wait_for(Path(paths[f"{name}_started"]).exists, f"{name}'s pod to run it", BOUND)
        Path(paths["first_release"]).write_text("go")
        wait_for(
            lambda: all(name in step_pods(bed) for name in DOWNSTREAM),
            "the pods of the steps after first",
            BOUND,
        )
        server.stop()  # SIGKILL: slow's pod runs its step, the new pods' processes start
        down = time.monotonic()
        time.sleep(OUTAGE_SECONDS / 4)  # part of the outage
        Path(paths["slow_release"]).write_text("go")  # slow ends during the outage
        assert script.poll() is None, "the run's script ended during the outage"
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down)))  # the outage's rest
        assert script.poll() is None, "the run's script ended during the outage"
        assert "total" not in step_pods(bed)
        server.start()  # same port, same database
        outage = time.monotonic() - down
    finally:
        if server.process is None:
            server.start()
        output = finished(script)
    assert script.returncode == 0, output
    (line,) = [x for x in output.splitlines() if x.startswith("RUN ")]
    run = bed.workspace.store.runs.get(UUID(line.split()[1]))
    assert run.status is ExecutionStatus.COMPLETED, (
        run.status_reason,
        output,
        orchestrator_logs(bed, run),
    )
    names = ["first", "slow", *DOWNSTREAM, "total"]
    steps = attempts(bed, run)
    assert sorted(s.name for s in steps) == sorted(names)  # one step run per step
    assert all(s.status is ExecutionStatus.COMPLETED for s in steps), [
        (s.name, s.status, s.status_reason) for s in steps
    ]
    pods = step_pods(bed)
    assert {name: len(made) for name, made in pods.items()} == dict.fromkeys(names, 1)
    waited = [name for name in DOWNSTREAM if waited_for_the_server(bed, pods[name][0])]
    assert waited == list(DOWNSTREAM), f"only {waited} started during the outage"
    assert outage >= OUTAGE_SECONDS
    assert wait_until(lambda: nothing_running(bed.emulator), BOUND), "a pod or Secret is left"
