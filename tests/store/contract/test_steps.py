"""Contract: step runs, their artifact links, transitions, and the cache lookup."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from tests.conftest import FakeClock
from tests.store.conftest import World
from wharf.config.settings import CachePolicy, ResourceSettings, RetryConfig
from wharf.config.spec import InputSpec, OutputSpec, StepConfig, StepSpec
from wharf.core.enums import ExecutionStatus as S
from wharf.core.enums import StepRuntime
from wharf.core.errors import (
    EntityExistsError,
    EntityNotFoundError,
    IllegalOperationError,
    IllegalTransitionError,
    InputError,
)
from wharf.store.column_rules import MAX_PID
from wharf.store.models import (
    PageRequest,
    StepRunCreate,
    StepRunFilter,
    StepRunRecord,
    StepRunUpdate,
)
from wharf.store.sql import tables as t


def step_spec() -> StepSpec:
    """A spec with every nested part filled in (config, retry, resources, cache policy...)."""
    return StepSpec(
        name="train",
        source="pkg.steps:train",
        source_code='def train(data, lr=0.1):\n    """Träin."""\n',
        code_hash="h2",
        docstring="Träin.",
        upstream=("load",),
        inputs={"data": InputSpec(step="load", output="output")},
        parameters={"lr": 0.1, "layers": [64, {"act": "relu"}], "tag": None},
        outputs={
            "model": OutputSpec(materializer="pkg.mat:Model", data_type="pkg.model:Model"),
            "metrics": OutputSpec(),
        },
        config=StepConfig(
            enable_cache=False,
            cache_policy=CachePolicy(ignored_inputs=("data",), expires_after=3600),
            retry=RetryConfig(max_retries=2, delay=1.5, backoff=2.0),
            resources=ResourceSettings(cpu_count=2, gpu_count=1, memory="4GB"),
            runtime=StepRuntime.ISOLATED,
            environment={"SEED": "1"},
            caching_parameters={"dataset": {"version": 3}},
            enable_heartbeat=False,
        ),
    )


def test_create_with_links_and_get(world: World, clock: FakeClock) -> None:
    run = world.run(status=S.RUNNING)
    data = world.version("data")
    model = world.version("model")
    source = "def train(data):\n    '''ünïcode'''\n" * 4000  # > 64 KiB on MySQL
    step = world.store.steps.create(
        StepRunCreate(
            run_id=run.id,
            name="train",
            status=S.RUNNING,
            cache_key="k",
            code_hash="abc",
            source_code=source,
            docstring="Train it.",
            parameters={"lr": 0.5, "layers": [1, 2], "name": None},
            inputs={"data": data.id},
            outputs={"model": model.id},
        )
    )
    assert step.project_id == world.project.id and step.attempt == 1
    assert step.inputs == {"data": data.id} and step.outputs == {"model": model.id}
    assert step.start_time == step.created == clock.now and step.end_time is None
    assert step.last_heartbeat is None
    loaded = world.store.steps.get(step.id)
    assert loaded == step and loaded.source_code == source


def test_spec_logs_uri_and_pid_round_trip(world: World, clock: FakeClock) -> None:
    steps = world.store.steps
    spec = step_spec()
    step = world.step(name="train", spec=spec, logs_uri="s3://bucket/logs/train.log")
    assert step.spec == spec and step.logs_uri == "s3://bucket/logs/train.log"
    assert step.pid is None and step.heartbeat_deadline is None
    loaded = steps.get(step.id)
    assert loaded == step and loaded.spec is not None
    assert loaded.spec.config.resources == spec.config.resources
    assert loaded.spec.config.cache_policy.ignored_inputs == ("data",)
    assert steps.list(StepRunFilter(names=("train",))).items == [step]
    moved = steps.update(step.id, StepRunUpdate(logs_uri="/logs/elsewhere.log"))
    assert (moved.logs_uri, moved.spec, moved.updated) == ("/logs/elsewhere.log", spec, clock.now)
    done = steps.update(step.id, StepRunUpdate(status=S.COMPLETED, cache_key="k"))
    assert (done.logs_uri, done.spec) == ("/logs/elsewhere.log", spec)  # None = unchanged
    assert steps.get(step.id) == done
    assert steps.find_cached(world.project.id, "k", clock.now) == done


def test_call_positions_round_trip(world: World) -> None:
    """A dynamic step run's ``calls`` (position -> invocation id) come back as written, also
    from a list; a step run written without them has none."""
    calls = {0: "load", 1: "train_0", 2: "train_1"}
    step = world.step(name="train_1", calls=calls)
    assert step.calls == calls
    assert world.store.steps.get(step.id).calls == calls
    assert world.store.steps.list(StepRunFilter(names=("train_1",))).items == [step]
    assert world.step().calls is None


def test_pid_round_trip(world: World, clock: FakeClock) -> None:
    """The store records a step's process; over REST only the step's own process may (its run
    token), which ``tests/server/test_step_process.py`` covers."""
    steps = world.store.steps
    spec = step_spec()
    step = world.step(name="train", spec=spec)
    with_pid = steps.update(step.id, StepRunUpdate(pid=4242, pid_host="h", pid_start="1"))
    assert (with_pid.pid, with_pid.spec, with_pid.updated) == (4242, spec, clock.now)
    moved = steps.update(step.id, StepRunUpdate(logs_uri="/logs/elsewhere.log"))
    assert (moved.pid, moved.logs_uri) == (4242, "/logs/elsewhere.log")  # None = unchanged
    done = steps.update(step.id, StepRunUpdate(status=S.COMPLETED))
    assert (done.pid, done.logs_uri, done.spec) == (4242, "/logs/elsewhere.log", spec)
    assert steps.update(step.id, StepRunUpdate(pid=MAX_PID)).pid == MAX_PID


def test_absent_spec_is_sql_null(world: World) -> None:
    without = world.step()
    with_spec = world.step(spec=step_spec())
    assert without.spec is None and world.store.steps.get(without.id).spec is None
    query = sa.select(t.step_run.c.id).where(t.step_run.c.spec.is_(None))
    with world.store._db.engine.connect() as conn:
        assert list(conn.execute(query).scalars()) == [without.id]
    assert world.store.steps.get(with_spec.id).spec == step_spec()


@pytest.mark.parametrize("pid", [0, -1, MAX_PID + 1])
def test_pid_out_of_range_is_refused(pid: int) -> None:
    with pytest.raises(ValidationError):
        StepRunUpdate(pid=pid)


def test_create_errors(world: World) -> None:
    run = world.run(status=S.RUNNING)
    world.step(run.id, name="train")
    with pytest.raises(EntityExistsError, match="already has a step run 'train'"):
        world.step(run.id, name="train")
    assert world.step(run.id, name="train", attempt=2).attempt == 2
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No pipeline run with id {missing}"):
        world.step(missing)
    with pytest.raises(EntityNotFoundError, match=f"No artifact version with id {missing}"):
        world.step(run.id, inputs={"x": missing})
    with pytest.raises(EntityNotFoundError, match=f"No artifact version with id {missing}"):
        world.step(run.id, outputs={"x": missing})
    with pytest.raises(EntityNotFoundError, match=f"No step run with id {missing}"):
        world.step(run.id, original_step_run_id=missing)
    with pytest.raises(IllegalTransitionError):
        world.step(run.id, status=S.COMPLETED)
    with pytest.raises(InputError, match="cannot be stored"):
        world.step(run.id, parameters={"x": object()})
    with pytest.raises(EntityNotFoundError) as info:
        world.store.steps.get(missing)
    assert str(info.value) == f"No step run with id {missing}."
    assert world.store.steps.list(StepRunFilter(run_id=run.id)).total == 2  # nothing partial


def test_deleted_run_is_not_found_even_when_cached(world: World) -> None:
    run = world.run(status=S.RUNNING)
    world.step(run.id)  # the repository now knows the run's project
    world.store.runs.delete(run.id)
    with pytest.raises(EntityNotFoundError, match=f"No pipeline run with id {run.id}"):
        world.step(run.id)


def test_created_finished_gets_end_time(world: World) -> None:
    original = world.step()
    cached = world.step(status=S.CACHED, original_step_run_id=original.id)
    assert cached.end_time == cached.created and cached.start_time is None
    assert cached.original_step_run_id == original.id


def test_update_status_times_and_outputs(world: World, clock: FakeClock) -> None:
    steps = world.store.steps
    step = world.step(status=S.QUEUED)
    assert step.start_time is None
    running = steps.update(step.id, StepRunUpdate(status=S.RUNNING))
    assert running.start_time == clock.now
    first = world.version("a")
    second = world.version("b")
    with_one = steps.update(step.id, StepRunUpdate(outputs={"a": first.id}))
    assert with_one.outputs == {"a": first.id}
    expires = clock.now + timedelta(hours=1)
    done = steps.update(
        step.id,
        StepRunUpdate(
            status=S.COMPLETED,
            status_reason="fine",
            outputs={"a": first.id, "b": second.id},  # re-adding a link is a no-op
            cache_key="key",
            cache_expires_at=expires,
        ),
    )
    assert done.outputs == {"a": first.id, "b": second.id}
    assert done.end_time == clock.now and done.start_time == running.start_time
    assert (done.cache_key, done.cache_expires_at, done.status_reason) == ("key", expires, "fine")
    assert steps.get(step.id) == done


@pytest.mark.parametrize("via", [(), (S.CANCELLING,)], ids=["failed", "reclaimed"])
def test_a_retried_attempt_gets_its_end_time(
    world: World, clock: FakeClock, via: tuple[S, ...]
) -> None:
    """``retrying`` is final (the next attempt is a new step run): the attempt has ended."""
    steps = world.store.steps
    step = world.step()
    for status in via:
        steps.update(step.id, StepRunUpdate(status=status))
    retried = steps.update(step.id, StepRunUpdate(status=S.RETRYING, status_reason="flaky"))
    assert retried.end_time == retried.updated == clock.now
    assert retried.start_time == step.start_time and steps.get(step.id) == retried


def test_update_refuses_relinking_and_illegal_transitions(world: World) -> None:
    steps = world.store.steps
    first, second = world.version("a"), world.version("a")
    step = world.step(outputs={"a": first.id})
    with pytest.raises(IllegalOperationError, match="already has output 'a'"):
        steps.update(step.id, StepRunUpdate(status=S.FAILED, outputs={"a": second.id}))
    assert steps.get(step.id) == step
    done = steps.update(step.id, StepRunUpdate(status=S.COMPLETED))
    with pytest.raises(IllegalTransitionError, match="completed -> running"):
        steps.update(step.id, StepRunUpdate(status=S.RUNNING, status_reason="again"))
    assert steps.get(step.id) == done
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No step run with id {missing}"):
        steps.update(missing, StepRunUpdate(status=S.RUNNING))
    with pytest.raises(EntityNotFoundError, match=f"No artifact version with id {missing}"):
        steps.update(step.id, StepRunUpdate(outputs={"c": missing}))
    assert steps.get(step.id) == done


def test_list_filters_and_links(world: World) -> None:
    run = world.run(status=S.RUNNING)
    version = world.version()
    a = world.step(run.id, name="a", outputs={"out": version.id})
    b = world.step(run.id, name="b", inputs={"in": version.id}, cache_key="k")
    c = world.step(run.id, name="c", status=S.QUEUED)
    other = world.step(name="a")
    steps = world.store.steps
    assert steps.list().total == 4
    by_run = steps.list(StepRunFilter(run_id=run.id), PageRequest(sort="asc"))
    assert by_run.items == [a, b, c]
    assert by_run.items[0].outputs == {"out": version.id}
    assert by_run.items[1].inputs == {"in": version.id}
    names = steps.list(StepRunFilter(run_id=run.id, names=("a", "c")))
    assert [s.name for s in names.items] == ["c", "a"]
    assert steps.list(StepRunFilter(names=())).total == 0
    assert [s.id for s in steps.list(StepRunFilter(names=("a",))).items] == [other.id, a.id]
    assert steps.list(StepRunFilter(status=S.QUEUED)).items == [c]
    assert steps.list(StepRunFilter(cache_key="k")).items == [b]
    assert steps.list(StepRunFilter(project_id=world.project.id)).total == 4
    steps.update(b.id, StepRunUpdate(status=S.FAILED))
    either = steps.list(StepRunFilter(statuses=(S.QUEUED, S.FAILED)), PageRequest(sort="asc"))
    assert [s.id for s in either.items] == [b.id, c.id] and either.total == 2
    assert steps.list(StepRunFilter(statuses=(S.RUNNING,))).total == 2
    assert steps.list(StepRunFilter(statuses=())).total == 0
    both = StepRunFilter(run_id=run.id, status=S.FAILED, statuses=(S.FAILED, S.RUNNING))
    assert [s.id for s in steps.list(both).items] == [b.id]
    assert steps.list(StepRunFilter(status=S.QUEUED, statuses=(S.FAILED,))).total == 0


def test_find_cached(world: World, clock: FakeClock) -> None:
    steps = world.store.steps
    assert steps.find_cached(world.project.id, "k", clock.now) is None

    def completed(key: str, **kw: Any) -> StepRunRecord:
        step = world.step(cache_key=key, **kw)
        return steps.update(step.id, StepRunUpdate(status=S.COMPLETED))

    world.step(cache_key="k")  # running: not a cache hit
    failed = world.step(cache_key="k")
    steps.update(failed.id, StepRunUpdate(status=S.FAILED))
    older = completed("k")
    newer = completed("k", outputs={"o": world.version().id})
    completed("other-key")
    assert steps.find_cached(world.project.id, "k", clock.now) == steps.get(newer.id)

    # Expiry: strictly later than ``now`` is still valid; at or before is expired.
    expiring = completed("e", cache_expires_at=clock.now + timedelta(seconds=10))
    assert steps.find_cached(world.project.id, "e", clock.now) == expiring
    assert expiring.cache_expires_at is not None
    assert steps.find_cached(world.project.id, "e", expiring.cache_expires_at) is None
    assert older.cache_expires_at is None

    # Another project never sees this project's cache.
    elsewhere = world.store.projects.create("elsewhere")
    assert steps.find_cached(elsewhere.id, "k", clock.now) is None
