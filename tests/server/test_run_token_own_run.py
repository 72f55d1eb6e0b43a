"""A run token starts, beats for and ends its own run -- the placeholder the client recorded --
and nothing more, through the same client calls an orchestrator pod makes (``RestStore``,
``start_run``, ``update_heartbeat``, ``finish``, ``for_run``).

The rest is what a hostile holder of a leaked run token tries: starting, beating for or ending
another run (of its project: 403; of another: 404), creating a run (directly, or through a
start that would take another placeholder of its snapshot or start its run twice), stopping,
renaming or deleting its own run, and getting a fresh token (which would outlive its own)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import World
from tests.server.matrix import Things
from tests.store.conftest import spec
from wharf.artifacts.materializers.registry import default_registry
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.global_config import API_KEY_ENV, SERVER_URL_ENV
from wharf.core.enums import ExecutionStatus
from wharf.execution.run_heartbeat import RunHeartbeat
from wharf.execution.run_lifecycle import start_run
from wharf.execution.services import RunServices, for_run, run_token_scope
from wharf.store.models import (
    OrchestratorProcess,
    PipelineRunRecord,
    RunCreate,
    RunFilter,
    RunUpdate,
    SnapshotCreate,
)
from wharf.store.rest.errors import PermissionDeniedError
from wharf.store.rest.store import RestStore

PROCESS = OrchestratorProcess(host="pod-1", pid=7, start="b:1", liveness_timeout_seconds=30)


def placeholder(world: World, things: Things, name: str = "planned") -> PipelineRunRecord:
    """A placeholder run recorded by the member (as a client records one before submitting)."""
    return world.stores.store.runs.create(
        RunCreate(
            project_id=world.a.id,
            pipeline_id=things.pipeline.id,
            snapshot_id=things.snapshot.id,
            name=name,
            user_id=world.users["member"].id,
        )
    )


def token_of(world: World, run: PipelineRunRecord) -> str:
    answer = world.as_role("member").post(f"/api/v1/runs/{run.id}/token")
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


@pytest.fixture
def things(world: World) -> Things:
    return Things(world)


@pytest.fixture
def pod_store(world: World, things: Things) -> Iterator[tuple[PipelineRunRecord, RestStore]]:
    """A placeholder run and a REST store authenticated with its run token only (an
    orchestrator pod's view)."""
    run = placeholder(world, things)
    store = RestStore(world.url, token_of(world, run))
    try:
        yield run, store
    finally:
        store.close()


def run_count(world: World) -> int:
    return world.stores.store.runs.list(RunFilter(project_id=world.a.id)).total


def test_a_run_token_starts_beats_for_and_ends_its_own_run(
    world: World, pod_store: tuple[PipelineRunRecord, RestStore]
) -> None:
    planned, store = pod_store
    before = run_count(world)
    started = start_run(store, planned, "kubernetes-uid-1", PROCESS)
    assert started.id == planned.id and started.status is ExecutionStatus.RUNNING
    assert started.orchestrator_run_id == "kubernetes-uid-1"
    assert started.orchestrator_host == "pod-1" and started.heartbeat_deadline is not None
    assert started.start_time is not None and started.name == planned.name
    assert started.user_id == world.users["member"].id
    # A repeated start (an answer lost on the way) returns the same run, created no other.
    again = start_run(store, planned, "kubernetes-uid-1", PROCESS)
    assert again.id == planned.id and again.status is ExecutionStatus.RUNNING
    assert run_count(world) == before

    beat = store.runs.update_heartbeat(planned.id, PROCESS)
    assert beat.status is ExecutionStatus.RUNNING and not beat.stop_forced

    ended = store.runs.finish(planned.id, ExecutionStatus.COMPLETED, None)
    assert ended.status is ExecutionStatus.COMPLETED and ended.end_time is not None
    assert world.stores.store.runs.get(planned.id).status is ExecutionStatus.COMPLETED


def test_a_run_tokens_heartbeat_leaves_the_sweep_to_the_server_after_one_refusal(
    world: World,
    pod_store: tuple[PipelineRunRecord, RestStore],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An orchestrator pod's heartbeat may not sweep lost runs (the server sweeps itself): it
    asks once, and neither asks again nor warns on each beat."""
    planned, store = pod_store
    start_run(store, planned, "kubernetes-uid-3", PROCESS)
    asked: list[object] = []
    candidates = store.runs.list_sweep_candidates

    def counted(*args: Any, **kwargs: Any) -> Any:
        asked.append(args)
        return candidates(*args, **kwargs)

    monkeypatch.setattr(store.runs, "list_sweep_candidates", counted)
    caplog.set_level(logging.DEBUG, logger="wharf")
    heartbeat = RunHeartbeat.start(store, planned.id, 30.0)
    try:
        assert heartbeat.beat_once() and heartbeat.beat_once()
    finally:
        heartbeat.close()
    assert len(asked) == 1
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert "may not sweep runs" in caplog.text  # said once, at debug level


def test_a_run_token_ends_its_run_failed_or_stopped_as_finish_decides(
    world: World, things: Things
) -> None:
    for wanted in (ExecutionStatus.FAILED, ExecutionStatus.STOPPED):
        run = placeholder(world, things, f"ends-{wanted.value}")
        with RestStore(world.url, token_of(world, run)) as store:
            start_run(store, run, f"orchestrator-{wanted.value}", PROCESS)
            ended = store.runs.finish(run.id, wanted, "why")
        assert ended.status is wanted and ended.status_reason == "why"
    # A stop asked by the user meanwhile is honoured: the run ends stopped, not completed.
    run = placeholder(world, things, "stopped-by-user")
    with RestStore(world.url, token_of(world, run)) as store:
        start_run(store, run, "orchestrator-stop", PROCESS)
        stop = world.as_role("member").patch(f"/api/v1/runs/{run.id}", json={"status": "stopping"})
        assert stop.status_code == 200, stop.text
        assert store.runs.update_heartbeat(run.id, PROCESS).status is ExecutionStatus.STOPPING
        ended = store.runs.finish(run.id, ExecutionStatus.COMPLETED, None)
    assert ended.status is ExecutionStatus.STOPPED


def test_a_run_token_records_its_own_run_stopping_gracefully_or_by_force(
    world: World, things: Things
) -> None:
    """Its orchestrating process's Ctrl-C was refused ("may only end its own run"), so the
    run's isolated steps, which hear of a stop through the store, ran on to the end."""
    run = placeholder(world, things, "ctrl-c")
    with RestStore(world.url, token_of(world, run)) as store:
        start_run(store, run, "orchestrator-ctrl-c", PROCESS)
        stopping = store.runs.update(run.id, RunUpdate(status=ExecutionStatus.STOPPING))
        assert stopping.status is ExecutionStatus.STOPPING and not stopping.stop_forced
        forced = RunUpdate(status=ExecutionStatus.STOPPING, stop_forced=True)
        assert store.runs.update(run.id, forced).stop_forced is True
        ended = store.runs.finish(run.id, ExecutionStatus.COMPLETED, None)
    assert ended.status is ExecutionStatus.STOPPED


def test_a_start_never_takes_another_placeholder_of_the_same_snapshot(
    world: World, things: Things
) -> None:
    older = placeholder(world, things, "older")  # an account's start would take this one first
    mine = placeholder(world, things, "mine")
    with RestStore(world.url, token_of(world, mine)) as store:
        started = start_run(store, mine, "kubernetes-uid-2", PROCESS)
    assert started.id == mine.id
    assert world.stores.store.runs.get(older.id).status is ExecutionStatus.INITIALIZING


def start_body(run: PipelineRunRecord, **changes: Any) -> dict[str, Any]:
    body = {
        "project_id": str(run.project_id),
        "pipeline_id": str(run.pipeline_id),
        "snapshot_id": str(run.snapshot_id),
        "name": run.name,
        "status": "running",
        "orchestrator_run_id": "kubernetes-uid-3",
    }
    return {**body, **changes}


def other_snapshot_run(world: World, things: Things, project: Any) -> PipelineRunRecord:
    store = world.stores.store
    pipeline = store.pipelines.get_or_create(project.id, "elsewhere")
    snapshot = store.snapshots.create(
        SnapshotCreate(project_id=project.id, pipeline_id=pipeline.id, spec=spec())
    )
    return store.runs.create(
        RunCreate(project_id=project.id, pipeline_id=pipeline.id, snapshot_id=snapshot.id, name="o")
    )


def test_a_leaked_run_token_cannot_start_create_or_end_any_other_run(
    world: World, things: Things, pod_store: tuple[PipelineRunRecord, RestStore]
) -> None:
    mine, _ = pod_store
    runner = world.client(token_of(world, mine))
    sibling = placeholder(world, things, "sibling")  # same snapshot
    elsewhere = other_snapshot_run(world, things, world.a)  # same project
    foreign = other_snapshot_run(world, things, world.b)  # another project
    before = run_count(world)
    refused: list[tuple[str, str, Any, int]] = [
        # creating runs, directly or through a "start"
        ("POST", "/api/v1/runs", start_body(mine, name="new", status="initializing"), 403),
        ("POST", "/api/v1/runs", start_body(mine, name="new"), 403),
        ("POST", "/api/v1/runs/get_or_create", start_body(sibling), 403),
        ("POST", "/api/v1/runs/get_or_create", start_body(elsewhere), 403),
        ("POST", "/api/v1/runs/get_or_create", start_body(mine, name="renamed"), 403),
        ("POST", "/api/v1/runs/get_or_create", start_body(mine, status="initializing"), 403),
        ("POST", "/api/v1/runs/get_or_create", start_body(mine, orchestrator_run_id=None), 403),
        ("POST", "/api/v1/runs/get_or_create", start_body(foreign), 404),
        # beating for and ending other runs
        ("PUT", f"/api/v1/runs/{sibling.id}/heartbeat", PROCESS.model_dump(mode="json"), 403),
        ("PUT", f"/api/v1/runs/{foreign.id}/heartbeat", PROCESS.model_dump(mode="json"), 404),
        ("PATCH", f"/api/v1/runs/{sibling.id}", {"status": "failed"}, 403),
        ("PATCH", f"/api/v1/runs/{elsewhere.id}", {"status": "failed"}, 403),
        ("PATCH", f"/api/v1/runs/{foreign.id}", {"status": "failed"}, 404),
        ("DELETE", f"/api/v1/runs/{sibling.id}", None, 403),
        ("POST", f"/api/v1/runs/{sibling.id}/token", None, 403),
        ("PATCH", f"/api/v1/runs/{sibling.id}", {"status": "stopping"}, 403),
        # its own run: anything but a start, a beat, its stop and an end
        ("PATCH", f"/api/v1/runs/{mine.id}", {"status": "running"}, 403),
        ("PATCH", f"/api/v1/runs/{mine.id}", {"status": "stopping", "status_reason": "x"}, 403),
        ("PATCH", f"/api/v1/runs/{mine.id}", {"status_reason": "x"}, 403),
        ("PATCH", f"/api/v1/runs/{mine.id}", {"orchestrator_run_id": "mine"}, 403),
        ("PATCH", f"/api/v1/runs/{mine.id}", {"status": "failed", "stop_forced": True}, 403),
        ("DELETE", f"/api/v1/runs/{mine.id}", None, 403),
        ("POST", f"/api/v1/runs/{mine.id}/token", None, 403),  # a token never renews itself
    ]
    for method, path, payload, status in refused:
        answer = runner.request(method, path, json=payload)
        assert answer.status_code == status, (method, path, payload, answer.text)
    assert run_count(world) == before
    for other in (sibling, elsewhere, foreign, mine):
        assert world.stores.store.runs.get(other.id).status is ExecutionStatus.INITIALIZING

    # Once started, a start with another orchestrator run id would create a second run.
    started = runner.post("/api/v1/runs/get_or_create", json=start_body(mine))
    assert started.status_code == 200 and started.json()["created"] is True, started.text
    again = runner.post("/api/v1/runs/get_or_create", json=start_body(mine))
    assert again.status_code == 200 and again.json()["created"] is False
    twice = start_body(mine, orchestrator_run_id="kubernetes-uid-4")
    assert runner.post("/api/v1/runs/get_or_create", json=twice).status_code == 403
    assert run_count(world) == before
    # Ended, it cannot be started again either.
    assert runner.patch(f"/api/v1/runs/{mine.id}", json={"status": "failed"}).status_code == 200
    assert runner.post("/api/v1/runs/get_or_create", json=start_body(mine)).status_code == 200
    assert runner.post("/api/v1/runs/get_or_create", json=twice).status_code == 403
    assert run_count(world) == before


def test_an_account_still_starts_and_creates_runs_as_before(world: World, things: Things) -> None:
    planned = placeholder(world, things, "by-member")
    member = world.as_role("member")
    started = member.post("/api/v1/runs/get_or_create", json=start_body(planned))
    assert started.status_code == 200 and started.json()["run"]["id"] == str(planned.id)
    created = member.post(
        "/api/v1/runs/get_or_create",
        json=start_body(planned, name="fresh", orchestrator_run_id="b"),
    )
    assert created.status_code == 200 and created.json()["created"] is True
    assert created.json()["run"]["id"] != str(planned.id)
    viewer = world.as_role("viewer")
    assert viewer.post("/api/v1/runs/get_or_create", json=start_body(planned)).status_code == 403


def services_on(store: RestStore, project_id: Any, tmp_path: Path, **env: str) -> RunServices:
    return RunServices(
        store=store,
        artifact_store=LocalArtifactStore(tmp_path / "artifacts"),
        materializers=default_registry(),
        project_id=project_id,
        child_env={SERVER_URL_ENV: store.url, **env},
    )


def test_for_run_passes_on_the_run_token_it_holds_and_asks_for_no_other(
    world: World, things: Things, tmp_path: Path
) -> None:
    run = placeholder(world, things)
    token = token_of(world, run)
    with RestStore(world.url, token) as store:
        # The orchestrator pod: its steps get the token it holds (a new one would be refused).
        services = services_on(store, run.project_id, tmp_path, **{API_KEY_ENV: token})
        assert for_run(services, run.id).child_env[API_KEY_ENV] == token
        # A token of another run is no token of this one: it asks, and is refused.
        other = placeholder(world, things, "other")
        with pytest.raises(PermissionDeniedError):
            for_run(services, other.id)
    # An account's credential is replaced by a fresh token of the run.
    member_key = str(world.credentials["member"])
    with RestStore(world.url, member_key) as store:
        services = services_on(store, run.project_id, tmp_path, **{API_KEY_ENV: member_key})
        issued = for_run(services, run.id).child_env[API_KEY_ENV]
    assert issued != member_key and run_token_scope(issued) == run.id


@pytest.mark.parametrize(
    "credential",
    ["wharf_abc_def", "a.b.c", "a.e30.c", "", "x.eyJ0eXAiOiJydW4ifQ.y", "not-a-token"],
)
def test_run_token_scope_is_none_for_anything_but_a_run_token(credential: str) -> None:
    assert run_token_scope(credential) is None


def test_run_token_scope_is_none_for_a_login(world: World) -> None:
    assert run_token_scope(str(world.credentials["member"])) is None  # an access token
    assert run_token_scope(str(world.credentials["admin"])) is None  # an API key


def test_a_start_with_an_unstorable_orchestrator_writes_nothing(db_world: World) -> None:
    things = Things(db_world)
    mine = placeholder(db_world, things)
    runner = db_world.client(token_of(db_world, mine))
    process = {**PROCESS.model_dump(mode="json"), "host": "pod\x00-1"}
    answer = runner.post("/api/v1/runs/get_or_create", json=start_body(mine, orchestrator=process))
    assert answer.status_code == 422, answer.text
    run = db_world.stores.store.runs.get(mine.id)
    assert run.status is ExecutionStatus.INITIALIZING and run.orchestrator_run_id is None


def test_a_repeated_start_records_the_orchestrator_a_first_one_did_not(
    world: World, things: Things
) -> None:
    """What a start cut short between its two writes left (the run started, its orchestrator
    not recorded) is completed by the client's retry of the same start."""
    mine = placeholder(world, things)
    started = RunUpdate(status=ExecutionStatus.RUNNING, orchestrator_run_id="kubernetes-uid-3")
    world.stores.store.runs.update(mine.id, started)
    runner = world.client(token_of(world, mine))
    body = start_body(mine, orchestrator=PROCESS.model_dump(mode="json"))
    again = runner.post("/api/v1/runs/get_or_create", json=body)
    assert again.status_code == 200 and again.json()["created"] is False, again.text
    run = world.stores.store.runs.get(mine.id)
    assert run.orchestrator_host == "pod-1" and run.heartbeat_deadline is not None
    assert again.json()["run"]["orchestrator_host"] == "pod-1"
