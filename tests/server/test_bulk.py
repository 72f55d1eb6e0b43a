"""Batch and combined calls (optional store capabilities) and the batched fetch by names."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tests.server.conftest import World
from tests.server.matrix import Things
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import RunStoppingError
from wharf.store.models import (
    ArtifactVersionCreate,
    RunUpdate,
    StepRunCreate,
    StepRunFilter,
    StepRunUpdate,
)
from wharf.store.rest import RestStore
from wharf.store.rest.errors import RequestTooLargeError
from wharf.store.rest.steps import list_step_runs_by_names


@pytest.fixture
def rest(world: World) -> Iterator[RestStore]:
    store = RestStore(world.url, world.credentials["member"])
    yield store
    store.close()


def test_create_many_and_versions(world: World, rest: RestStore) -> None:
    things = Things(world)
    steps = rest.steps
    creates = [
        StepRunCreate(run_id=things.run.id, name=f"s{i}", status=S.RUNNING) for i in range(5)
    ]
    records = steps.create_many(creates)
    assert [r.name for r in records] == [c.name for c in creates]
    assert all(rest.steps.get(r.id) == r for r in records)
    assert steps.create_many([]) == []
    version = ArtifactVersionCreate(
        project_id=world.a.id, name="m", uri="/u", data_type="t", materializer="x"
    )
    artifacts = rest.artifacts
    made = artifacts.create_versions([version, version, version.model_copy(update={"name": "n"})])
    assert [(v.name, v.version) for v in made] == [("m", 1), ("m", 2), ("n", 1)]
    assert rest.artifacts.create_version(version).version == 3


def test_find_cached_or_create_and_finish(world: World, rest: RestStore) -> None:
    things = Things(world)
    steps = rest.steps
    now = datetime.now(UTC)
    create = StepRunCreate(run_id=things.run.id, name="train", status=S.RUNNING, cache_key="ck")
    miss = steps.find_cached_or_create(create, world.a.id, now, record_hit=True)
    first = miss.step
    assert miss.created and first.status is S.RUNNING
    assert miss.outputs == {} and miss.recorded is None
    output = ArtifactVersionCreate(
        project_id=world.a.id,
        name="model",
        uri="/m",
        data_type="t",
        materializer="x",
        producer_step_run_id=first.id,
    )
    done, outputs = steps.finish(first.id, StepRunUpdate(status=S.COMPLETED), {"model": output})
    assert done.status is S.COMPLETED and done.outputs == {"model": outputs["model"].id}
    again = create.model_copy(update={"name": "train-2"})
    hit = steps.find_cached_or_create(again, world.a.id, datetime.now(UTC))
    assert not hit.created and hit.step == done  # nothing was created: the caller records it
    assert hit.outputs == outputs and hit.recorded is None  # the outputs come along
    assert rest.steps.list(StepRunFilter(run_id=things.run.id)).total == 2
    # asked to, the server records the hit too: the same record the caller would create
    third = create.model_copy(update={"name": "train-3", "source_code": "def train(): ..."})
    recorded = steps.find_cached_or_create(third, world.a.id, datetime.now(UTC), record_hit=True)
    assert not recorded.created and recorded.step == done and recorded.outputs == outputs
    assert recorded.recorded is not None
    assert recorded.recorded == rest.steps.get(recorded.recorded.id)
    assert recorded.recorded.status is S.CACHED and recorded.recorded.name == "train-3"
    assert recorded.recorded.original_step_run_id == done.id
    assert recorded.recorded.outputs == done.outputs and recorded.recorded.cache_key == "ck"
    assert recorded.recorded.source_code == "def train(): ..."
    assert rest.steps.list(StepRunFilter(run_id=things.run.id)).total == 3


def test_fetch_by_names_splits_what_the_server_refuses(world: World, rest: RestStore) -> None:
    things = Things(world)
    steps = rest.steps
    names = [f"step-with-a-long-name-{i:04d}" for i in range(900)]
    for start in range(0, len(names), 300):
        steps.create_many(
            [
                StepRunCreate(run_id=things.run.id, name=n, status=S.RUNNING)
                for n in names[start : start + 300]
            ]
        )
    with pytest.raises(RequestTooLargeError):  # one request with every name: 414
        rest.steps.list(StepRunFilter(run_id=things.run.id, names=tuple(names)))
    found = list_step_runs_by_names(rest.steps, things.run.id, names, budget=100_000)
    assert sorted(s.name for s in found) == sorted(names)
    found = list_step_runs_by_names(rest.steps, things.run.id, [*names[:10], "missing"])
    assert sorted(s.name for s in found) == sorted(names[:10])


def test_batch_records_equal_single_ones(world: World, rest: RestStore) -> None:
    from wharf.config.spec import StepSpec
    from wharf.core.enums import StepRuntime

    things = Things(world)
    steps = rest.steps
    fields = {
        "status": S.RUNNING,
        "cache_key": "k",
        "code_hash": "h",
        "source_code": "def f(): ...",
        "docstring": "Doc.",
        "parameters": {"a": [1, {"b": None}]},
        "inputs": {"x": things.version.id},
        "spec": StepSpec(name="s", source="m:f", code_hash="h"),
        "logs_uri": "/logs",
        "runtime": StepRuntime.ISOLATED,
    }
    single = rest.steps.create(StepRunCreate(run_id=things.run.id, name="one", **fields))
    (batched,) = steps.create_many([StepRunCreate(run_id=things.run.id, name="two", **fields)])
    ignored = {"id", "name", "created", "updated", "start_time"}
    assert single.model_dump(exclude=ignored) == batched.model_dump(exclude=ignored)
    assert rest.steps.get(batched.id) == batched


def test_a_stopping_run_refuses_new_steps_with_the_same_error(
    world: World, rest: RestStore
) -> None:
    things = Things(world)
    rest.runs.update(things.run.id, RunUpdate(status=S.STOPPING))
    create = StepRunCreate(run_id=things.run.id, name="late", status=S.RUNNING, cache_key="ck")
    steps = rest.steps
    with pytest.raises(RunStoppingError, match="was not started"):
        steps.find_cached_or_create(create, world.a.id, datetime.now(UTC))
    with pytest.raises(RunStoppingError):
        rest.steps.create(create)
    assert rest.steps.list(StepRunFilter(run_id=things.run.id, names=["late"])).total == 0
