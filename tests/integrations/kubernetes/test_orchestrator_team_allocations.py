# ruff: noqa: F811  (fixtures imported from the server tests)
"""A step that asks for a licence, run on Kubernetes through a workspace server that has a
Resource Manager: the orchestrator pod asks the server for the step's allocation and the step
pod carries it. The pod's store is the server (REST): it asked for nothing, so a licence
another run held did not hold this step back, and the pod got no allocation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.artifacts.s3_server import MotoServer
from tests.integrations.kubernetes.team_bed import TeamBed, open_team_bed
from tests.integrations.kubernetes.testbed import reported_run_id, run_script, runner_script
from tests.server.conftest import live  # noqa: F401 (fixture)
from tests.server.resource_world import (  # noqa: F401 (fixtures)
    POOL,
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
)
from wharf.core.enums import ExecutionStatus
from wharf.integrations.kubernetes.allocation import REQUEST_ID_ANNOTATION
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, STEP_KEY
from wharf.store.models import StepRunFilter

STEPS_MODULE = """
from wharf import ResourceSettings, pipeline, step


@step(enable_cache=False, settings={"resources": ResourceSettings(resources={"license": 1})})
def solve() -> int:
    return 42


@pipeline
def licensed() -> None:
    solve()
"""


@pytest.fixture
def team_bed(
    team: Team,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    s3_bucket: str,
) -> Iterator[TeamBed]:
    files = {"licensed_steps.py": STEPS_MODULE, "run.py": runner_script("licensed_steps")}
    with open_team_bed(team.world, tmp_path, monkeypatch, s3_server, s3_bucket, files) as bed:
        yield bed


def test_a_step_pod_gets_its_allocation_through_the_workspace_server(
    team: Team, team_bed: TeamBed
) -> None:
    bed = team_bed
    done = run_script(bed, "licensed")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    run = bed.workspace.store.runs.get(reported_run_id(done))
    assert run.status is ExecutionStatus.COMPLETED, (run.status_reason, output)
    (step,) = bed.workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
    assert step.resource_request_id is not None, output  # it asked the Resource Manager
    assert team.rm_admin is not None
    request = team.rm_admin.requests.get(step.resource_request_id)
    assert request.status.value == "released"
    assert [d.resource for d in request.demands] == ["license"]
    pool = team.rm_admin.pools.get(POOL).id
    assert request.allocations and {a.pool_id for a in request.allocations} == {pool}
    (pod,) = [
        p
        for p in bed.seen.of_kind("Pod")
        if p["metadata"].get("labels", {}).get(RUN_ID_KEY) == str(run.id)
        and p["metadata"]["labels"].get(STEP_KEY) == "solve"
    ]
    annotations = pod["metadata"].get("annotations", {})
    assert annotations.get(REQUEST_ID_ANNOTATION) == str(step.resource_request_id)
