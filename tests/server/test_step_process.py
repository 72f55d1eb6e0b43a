"""Who records a step's process (what ``wharf runs stop --force`` signals), with real processes:
a decoy ``sleep`` whose pid, host and start token other principals try to record on a step of
someone else's run over HTTP (refused), and force stops of what was recorded (the decoy lives:
no backend of this machine started it for that step). Force-stopping processes a backend did
start: ``tests/execution/test_local_process_backend.py``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import World
from tests.server.matrix import Things
from wharf.core.enums import ExecutionStatus
from wharf.execution.local_process import LocalProcessBackend
from wharf.store.account_models import ProjectRole
from wharf.store.models import RunCreate, StepRunCreate, StepRunRecord
from wharf.store.process_identity import start_token, this_host


@pytest.fixture
def decoy() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "300"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def identity(process: subprocess.Popen[bytes]) -> dict[str, Any]:
    token = start_token(process.pid)
    assert token is not None
    return {"pid": process.pid, "host": this_host(), "start": token}


def owned_step(world: World, things: Things) -> tuple[Any, StepRunRecord]:
    """A running step of a run that the project member ``member`` made."""
    store = world.stores.store
    run = store.runs.create(
        RunCreate(
            project_id=world.a.id,
            pipeline_id=things.pipeline.id,
            snapshot_id=things.snapshot.id,
            name="owned",
            status=ExecutionStatus.RUNNING,
            user_id=world.users["member"].id,
        )
    )
    step = store.steps.create(StepRunCreate(run_id=run.id, name="s", status="running"))
    return run, step


def run_token(client: httpx.Client, run_id: Any) -> str:
    answer = client.post(f"/api/v1/runs/{run_id}/token")
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


def recorded(world: World, step_id: Any) -> StepRunRecord:
    answer = world.as_role("admin").get(f"/api/v1/steps/{step_id}")
    assert answer.status_code == 200
    return StepRunRecord.model_validate(answer.json())


def test_no_one_but_the_steps_own_process_records_a_pid(
    world: World, decoy: subprocess.Popen[bytes]
) -> None:
    things = Things(world)
    run, step = owned_step(world, things)
    colleague = world.member("colleague", world.a, ProjectRole.MEMBER)
    process = identity(decoy)
    as_patch = {"pid": process["pid"], "pid_host": process["host"], "pid_start": process["start"]}
    path = f"/api/v1/steps/{step.id}"

    # A member of the project, an admin, through the generic update or the update at the
    # end of a step: refused, with a message saying how a pid is recorded.
    for role in ("member", "padmin", "admin"):
        for method, url, body in (
            ("PATCH", path, as_patch),
            ("POST", f"{path}/finish", {"update": as_patch}),
        ):
            answer = world.as_role(role).request(method, url, json=body)
            assert answer.status_code == 422, (role, method, answer.text)
            assert "step's own process" in answer.text
    for partial in ({"pid": process["pid"]}, {"pid_host": "h"}, {"pid_start": "t"}):
        assert world.as_role("member").patch(path, json=partial).status_code == 422

    # The process route: logins are refused, and so is a run token of the same run that
    # another member of the project had issued to themselves.
    for role in ("member", "padmin", "admin"):
        answer = world.as_role(role).put(f"{path}/process", json=process)
        assert answer.status_code == 403, (role, answer.text)
        assert "own process" in answer.json()["detail"]
    foreign = world.client(run_token(world.client(colleague), run.id))
    assert foreign.put(f"{path}/process", json=process).status_code == 403
    # A run token of another run of the project, even the owner's own.
    _, other_step = owned_step(world, things)
    own_elsewhere = world.client(run_token(world.as_role("member"), other_step.run_id))
    assert own_elsewhere.put(f"{path}/process", json=process).status_code in (403, 404)

    assert recorded(world, step.id).pid is None
    # The force stop that follows signals nothing: the decoy lives.
    assert LocalProcessBackend().stop_recorded(recorded(world, step.id)) is False
    assert decoy.poll() is None


def test_the_steps_own_run_token_records_it_and_a_force_stop_signals_only_what_it_started(
    world: World, decoy: subprocess.Popen[bytes]
) -> None:
    things = Things(world)
    run, step = owned_step(world, things)
    runner = world.client(run_token(world.as_role("member"), run.id))
    path = f"/api/v1/steps/{step.id}/process"
    process = identity(decoy)

    # Recorded with another start (the pid was reused) or from another host: never signalled.
    for wrong in ({"start": "0:1"}, {"host": "elsewhere"}, {"start": None}):
        answer = runner.put(path, json={**process, **wrong})
        assert answer.status_code == 200, answer.text
        record = recorded(world, step.id)
        assert record.pid == decoy.pid
        assert LocalProcessBackend().stop_recorded(record) is False
        assert decoy.poll() is None

    # Named exactly, by the step's own token: still not a process a backend started here
    # for this step, so not signalled either.
    answer = runner.put(path, json=process)
    assert answer.status_code == 200
    assert (answer.json()["pid_host"], answer.json()["pid_start"]) == (
        process["host"],
        process["start"],
    )
    assert LocalProcessBackend().stop_recorded(recorded(world, step.id)) is False
    assert decoy.poll() is None


def test_a_service_accounts_run_token_records_the_process_of_its_runs(world: World) -> None:
    things = Things(world)  # its run records no user: a machine's run
    runner = world.client(run_token(world.as_role("admin"), things.run.id))
    body = {"pid": 4242, "host": "worker-1", "start": "boot:7"}
    answer = runner.put(f"/api/v1/steps/{things.step.id}/process", json=body)
    assert answer.status_code == 200, answer.text
    assert recorded(world, things.step.id).pid == 4242
