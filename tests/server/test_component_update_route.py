"""``PATCH /api/v1/components/{id}`` over real HTTP: a new configuration is checked as on
registration (an fsspec artifact store's: no clear-text secret is stored), a refusal by the store
is a 409 with its reason, and bad bodies and ids are 4xx."""

from __future__ import annotations

import uuid

from tests.server.conftest import World, body
from tests.store.conftest import spec
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.store.models import ComponentCreate, ComponentRecord, RunCreate, SnapshotCreate


def _component(world: World, flavor: str, type: ComponentType, **config: object) -> ComponentRecord:
    return world.stores.store.stacks.create_component(
        ComponentCreate(name="remote", type=type, flavor=flavor, configuration=dict(config))
    )


def test_an_fsspec_store_is_checked_and_a_secret_is_refused(world: World) -> None:
    admin = world.as_role("admin")
    remote = _component(world, "fsspec", ComponentType.ARTIFACT_STORE, path="s3://bucket/old")
    url = f"/api/v1/components/{remote.id}"
    for configuration in (
        {"path": "s3://bucket/prefix", "secret": "hunter2"},
        {"path": "s3://bucket/prefix", "client_kwargs": {"aws_secret_access_key": "hunter2"}},
        {"path": "no-scheme"},
        {},
    ):
        response = admin.patch(url, json={"configuration": configuration})
        assert response.status_code == 400, response.text
        assert "hunter2" not in response.text
    assert world.stores.store.stacks.get_component(remote.id) == remote
    new = {"path": "s3://bucket/new/", "secret_env": "MY_SECRET"}
    updated = body(admin.patch(url, json={"configuration": new}))
    assert updated["configuration"] == {"path": "s3://bucket/new", "secret_env": "MY_SECRET"}
    assert (updated["name"], updated["type"], updated["flavor"]) == (
        "remote",
        "artifact_store",
        "fsspec",
    )


def test_an_unfinished_run_is_a_conflict_naming_it(world: World) -> None:
    store = world.stores.store
    orch = _component(world, "local_process", ComponentType.ORCHESTRATOR, python="/old/python")
    stack = store.stacks.create_stack("prod", {ComponentType.ORCHESTRATOR: orch.id})
    pipeline = store.pipelines.get_or_create(world.a.id, "training")
    snapshot = store.snapshots.create(
        SnapshotCreate(
            project_id=world.a.id, pipeline_id=pipeline.id, stack_id=stack.id, spec=spec()
        )
    )
    store.runs.create(
        RunCreate(
            project_id=world.a.id,
            pipeline_id=pipeline.id,
            snapshot_id=snapshot.id,
            name="busy",
            status=ExecutionStatus.RUNNING,
        )
    )
    response = world.as_role("admin").patch(
        f"/api/v1/components/{orch.id}", json={"configuration": {"python": "/new/python"}}
    )
    assert response.status_code == 409, response.text
    assert "unfinished run(s) busy" in response.text
    assert store.stacks.get_component(orch.id) == orch


def test_bad_bodies_and_unknown_ids(world: World) -> None:
    admin = world.as_role("admin")
    orch = _component(world, "local", ComponentType.ORCHESTRATOR)
    url = f"/api/v1/components/{orch.id}"
    for bad in ({}, {"configuration": "x"}, {"configuration": {}, "flavor": "other"}):
        assert admin.patch(url, json=bad).status_code == 422, bad
    missing = admin.patch(f"/api/v1/components/{uuid.uuid4()}", json={"configuration": {}})
    assert missing.status_code == 404, missing.text
    assert world.stores.store.stacks.get_component(orch.id) == orch
