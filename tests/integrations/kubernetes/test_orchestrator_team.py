"""A real 3-step pipeline on the Kubernetes orchestrator against a real workspace server.

The server is the server tests' ``world`` (a uvicorn server on a local port, its own SQLite
database, principals of every role). A project member submits the run from a script in a
directory of its own (``WHARF_SERVER_URL`` + the member's login token); the orchestrator Job's
pod and the step pods -- processes of the process kubelet -- reach the server with the run's
token only, handed to them through Kubernetes Secrets: the pod starts the placeholder run the
client recorded, beats for it, runs each step as a pod and ends the run. Artifacts lie on a
real S3 server (moto).

Then the token is taken from the Secret, as someone who can read Secrets in the namespace
could, and used against everything but its own run: refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.artifacts.s3_server import MotoServer
from tests.integrations.kubernetes.team_bed import TeamBed, env_of, open_team_bed, secret_values
from tests.integrations.kubernetes.testbed import (
    remaining_secrets,
    reported_run_id,
    run_script,
    runner_script,
)
from tests.server.conftest import (  # noqa: F401 (fixtures)
    World,
    live,
    world,
)
from wharf.config.global_config import API_KEY_ENV
from wharf.core.enums import ExecutionStatus
from wharf.execution.services import run_token_scope
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, STEP_KEY
from wharf.store.models import PipelineRunRecord, RunCreate, RunFilter, StepRunFilter

STEPS_MODULE = """
from wharf import pipeline, step


@step
def make(value: int) -> int:
    print("making", value)
    return value


@step
def double(value: int) -> int:
    return value * 2


@step
def add(a: int, b: int) -> int:
    return a + b


@pipeline
def on_kubernetes(value: int = 3) -> None:
    first = make(value)
    add(first, double(first))
"""


@pytest.fixture
def team_bed(
    world: World,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    s3_bucket: str,
) -> Iterator[TeamBed]:
    files = {"team_steps.py": STEPS_MODULE, "run.py": runner_script("team_steps")}
    with open_team_bed(world, tmp_path, monkeypatch, s3_server, s3_bucket, files) as bed:
        yield bed


def submit(bed: TeamBed, value: int) -> tuple[PipelineRunRecord, str]:
    """Run the pipeline through the project's script (a fresh process, as the member would);
    its run as the server has it once the script ended, and the script's output."""
    done = run_script(bed, "on_kubernetes", value=value)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return bed.workspace.store.runs.get(reported_run_id(done)), output


def test_a_run_on_kubernetes_uses_its_run_token_only_and_the_token_does_nothing_else(
    team_bed: TeamBed,
) -> None:
    bed = team_bed
    member_key = str(bed.server.credentials["member"])
    run, output = submit(bed, 3)
    assert run.status is ExecutionStatus.COMPLETED, (run.status_reason, output)
    assert run.orchestrator_run_id is not None
    assert run.orchestrator_run_id.startswith("kubernetes-")
    assert run.user_id == bed.server.users["member"].id and run.project_id == bed.server.a.id
    steps = bed.workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
    assert {s.name: s.status for s in steps} == {
        "make": ExecutionStatus.COMPLETED,
        "double": ExecutionStatus.COMPLETED,
        "add": ExecutionStatus.COMPLETED,
    }
    assert all(s.pid is not None for s in steps)  # recorded by the step pods' run token
    assert run.orchestrator_host is not None and run.last_heartbeat is not None  # the pod's
    # The pod started the client's placeholder: one run in the project, no other created.
    runs = bed.workspace.store.runs.list(RunFilter(project_id=bed.server.a.id)).items
    assert [r.id for r in runs] == [run.id]

    # Every pod got its credential from a Secret, and every Secret holds the run's token.
    pods = [
        p
        for p in bed.seen.of_kind("Pod")
        if p["metadata"].get("labels", {}).get(RUN_ID_KEY) == str(run.id)
    ]
    assert sorted(p["metadata"]["labels"].get(STEP_KEY, "") for p in pods) == [
        "",  # the orchestrator pod
        "add",
        "double",
        "make",
    ]
    for pod in pods:
        env = env_of(pod)
        assert all(member_key not in json.dumps(entry) for entry in env)
        keys = [e for e in env if e["name"] == API_KEY_ENV]
        assert keys and all("secretKeyRef" in e.get("valueFrom", {}) for e in keys), keys
    secrets = bed.seen.of_kind("Secret")
    tokens = {value for s in secrets for value in secret_values(s)}
    assert secrets and member_key not in tokens
    assert all(run_token_scope(token) == run.id for token in tokens), tokens
    assert len(tokens) == 1  # the orchestrator pod passed its own token on to the step pods
    (token,) = tokens
    assert remaining_secrets(bed.emulator) == []  # deleted with the run's end

    # The server takes it for the run, acting for the member, not as an admin.
    leaked = bed.server.client(token)
    me = leaked.get("/api/v1/auth/me").json()
    assert me["run_id"] == str(run.id) and me["name"] == "member" and me["is_admin"] is False
    assert_refused_elsewhere(bed.server, leaked, run)


def assert_refused_elsewhere(server: World, leaked: httpx.Client, run: PipelineRunRecord) -> None:
    """A holder of ``run``'s leaked token may neither start, beat for nor end another run, nor
    create one, nor restart, stop or delete its own, nor get a fresh token."""
    store = server.stores.store
    other = store.runs.create(  # another placeholder of the same snapshot, by the member
        RunCreate(
            project_id=run.project_id,
            pipeline_id=run.pipeline_id,
            snapshot_id=run.snapshot_id,
            name="planned-by-member",
            user_id=run.user_id,
        )
    )
    start = {
        "project_id": str(run.project_id),
        "pipeline_id": str(run.pipeline_id),
        "snapshot_id": str(run.snapshot_id),
        "status": "running",
        "orchestrator_run_id": "kubernetes-hostile",
    }
    beat = {"host": "h", "pid": 7, "start": "b:1", "liveness_timeout_seconds": 30}
    refused = [
        ("POST", "/api/v1/runs/get_or_create", {**start, "name": other.name}),
        ("POST", "/api/v1/runs/get_or_create", {**start, "name": run.name}),  # a second start
        ("POST", "/api/v1/runs/get_or_create", {**start, "name": "new", "status": "initializing"}),
        ("POST", "/api/v1/runs", {**start, "name": "new"}),
        ("PUT", f"/api/v1/runs/{other.id}/heartbeat", beat),
        ("PATCH", f"/api/v1/runs/{other.id}", {"status": "failed", "status_reason": "x"}),
        ("PATCH", f"/api/v1/runs/{other.id}", {"status": "stopping"}),  # its own: may stop it
        ("DELETE", f"/api/v1/runs/{other.id}", None),
        ("DELETE", f"/api/v1/runs/{run.id}", None),
        ("POST", f"/api/v1/runs/{run.id}/token", None),
        ("POST", f"/api/v1/runs/{other.id}/token", None),
    ]
    before = store.runs.list(RunFilter(project_id=run.project_id)).total
    for method, path, payload in refused:
        answer = leaked.request(method, path, json=payload)
        assert answer.status_code == 403, (method, path, payload, answer.text)
    assert store.runs.list(RunFilter(project_id=run.project_id)).total == before
    assert store.runs.get(other.id).status is ExecutionStatus.INITIALIZING
    assert store.runs.get(run.id).status is ExecutionStatus.COMPLETED
    # Another project's runs are not even seen.
    foreign = leaked.post(
        "/api/v1/runs/get_or_create", json={**start, "project_id": str(server.b.id), "name": "x"}
    )
    assert foreign.status_code == 404, foreign.text
