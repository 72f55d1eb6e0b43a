"""The engine's per-step store calls: one call where the store has the capability, the same
effect from the plain methods where not (stores are fakes that record their calls, plus the
real SQL store, which offers the capabilities)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from wharf.core.enums import ExecutionStatus, StepRuntime
from wharf.core.errors import InputError
from wharf.execution.store_calls import (
    KnownVersions,
    create_versions,
    find_cached_or_create,
    finish_step,
)
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    CachedOrCreated,
    Page,
    RunCreate,
    SnapshotCreate,
    StepRunCreate,
    StepRunRecord,
    StepRunUpdate,
)
from wharf.store.ports import ArtifactBatchOperations, StepRunBatchOperations
from wharf.store.sql import SqlStore

NOW = datetime(2026, 1, 1, tzinfo=UTC)
PROJECT = uuid.uuid4()
RUN = uuid.uuid4()


def step_record(name: str = "s", **values: Any) -> StepRunRecord:
    return StepRunRecord.model_validate(
        {
            "id": uuid.uuid4(),
            "project_id": PROJECT,
            "run_id": RUN,
            "name": name,
            "status": ExecutionStatus.RUNNING,
            "status_reason": None,
            "attempt": 1,
            "cache_key": None,
            "cache_expires_at": None,
            "original_step_run_id": None,
            "code_hash": None,
            "source_code": None,
            "docstring": None,
            "parameters": {},
            "inputs": {},
            "outputs": {},
            "start_time": None,
            "end_time": None,
            "last_heartbeat": None,
            "created": NOW,
            "updated": NOW,
            **values,
        }
    )


def version_record(create: ArtifactVersionCreate, number: int = 1) -> ArtifactVersionRecord:
    return ArtifactVersionRecord(
        id=uuid.uuid4(),
        artifact_id=uuid.uuid4(),
        project_id=create.project_id,
        name=create.name,
        version=number,
        uri=create.uri,
        data_type=create.data_type,
        materializer=create.materializer,
        content_hash=create.content_hash,
        producer_step_run_id=create.producer_step_run_id,
        artifact_store_id=None,
        created=NOW,
    )


def version_create(name: str) -> ArtifactVersionCreate:
    return ArtifactVersionCreate(
        project_id=PROJECT, name=name, uri=f"/a/{name}", data_type="builtins.int", materializer="m"
    )


class PlainSteps:
    """The plain step-run methods the engine's calls need, recording each call."""

    def __init__(self, cached: StepRunRecord | None = None) -> None:
        self.cached = cached
        self.calls: list[str] = []

    def find_cached(self, project_id: Any, cache_key: str, now: datetime) -> StepRunRecord | None:
        self.calls.append(f"find_cached {cache_key}")
        return self.cached

    def create(self, step: StepRunCreate) -> StepRunRecord:
        self.calls.append(f"create {step.name}")
        return step_record(step.name)

    def update(self, step_run_id: Any, update: StepRunUpdate) -> StepRunRecord:
        self.calls.append(f"update {update.status.value if update.status else None}")
        return step_record(status=update.status, outputs=update.outputs or {})


class BatchSteps(PlainSteps):
    """Also offers the combined calls (one recorded call each)."""

    def create_many(self, steps: Any) -> list[StepRunRecord]:
        raise AssertionError("not used by the engine")

    def find_cached_or_create(
        self, step: StepRunCreate, project_id: Any, now: datetime, *, record_hit: bool = False
    ) -> CachedOrCreated:
        self.calls.append(f"find_cached_or_create record_hit={record_hit}")
        if self.cached is None:
            return CachedOrCreated(step=step_record(step.name), created=True)
        recorded = step_record(step.name, status=ExecutionStatus.CACHED) if record_hit else None
        return CachedOrCreated(step=self.cached, created=False, recorded=recorded)

    def finish(
        self, step_run_id: Any, update: StepRunUpdate, outputs: Any
    ) -> tuple[StepRunRecord, dict[str, ArtifactVersionRecord]]:
        self.calls.append(f"finish {sorted(outputs)}")
        versions = {n: version_record(v) for n, v in outputs.items()}
        return step_record(status=update.status), versions


class PlainArtifacts:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.stored: dict[uuid.UUID, ArtifactVersionRecord] = {}

    def create_version(self, version: ArtifactVersionCreate) -> ArtifactVersionRecord:
        self.calls.append(f"create_version {version.name}")
        record = version_record(version)
        self.stored[record.id] = record
        return record

    def get_version(self, version_id: uuid.UUID) -> ArtifactVersionRecord:
        self.calls.append("get_version")
        return self.stored[version_id]

    def list_versions(self, filter: Any, page: Any) -> Page[ArtifactVersionRecord]:
        self.calls.append("list_versions")
        items = [
            v for v in self.stored.values() if v.producer_step_run_id == filter.producer_step_run_id
        ]
        return Page(items=items, index=1, size=page.size, total=len(items))


class BatchArtifacts(PlainArtifacts):
    def create_versions(self, versions: Any) -> list[ArtifactVersionRecord]:
        self.calls.append(f"create_versions {[v.name for v in versions]}")
        return [version_record(v, i + 1) for i, v in enumerate(versions)]


class FakeStore:
    def __init__(self, steps: PlainSteps, artifacts: PlainArtifacts | None = None) -> None:
        self.steps = steps
        self.artifacts = artifacts or PlainArtifacts()


def create(name: str = "s") -> StepRunCreate:
    return StepRunCreate(run_id=RUN, name=name, status=ExecutionStatus.RUNNING, cache_key="k")


# ----------------------------------------------------------------- find_cached_or_create


@pytest.mark.parametrize("steps_type", [PlainSteps, BatchSteps])
def test_a_miss_creates_the_step(steps_type: type[PlainSteps]) -> None:
    steps = steps_type()
    found = find_cached_or_create(FakeStore(steps), create("a"), PROJECT, NOW, record_hit=True)  # type: ignore[arg-type]
    assert found.created and found.step.name == "a" and found.recorded is None
    expected = (
        ["find_cached_or_create record_hit=True"]
        if steps_type is BatchSteps
        else ["find_cached k", "create a"]
    )
    assert steps.calls == expected


@pytest.mark.parametrize("steps_type", [PlainSteps, BatchSteps])
def test_a_hit_returns_the_cached_step_and_creates_nothing(steps_type: type[PlainSteps]) -> None:
    cached = step_record("original", status=ExecutionStatus.COMPLETED)
    steps = steps_type(cached)
    found = find_cached_or_create(FakeStore(steps), create("a"), PROJECT, NOW)  # type: ignore[arg-type]
    assert not found.created and found.step == cached and found.recorded is None
    assert not any(call.startswith("create") for call in steps.calls)


@pytest.mark.parametrize("steps_type", [PlainSteps, BatchSteps])
def test_a_hit_asked_to_records_it(steps_type: type[PlainSteps]) -> None:
    cached = step_record("original", status=ExecutionStatus.COMPLETED)
    steps = steps_type(cached)
    found = find_cached_or_create(FakeStore(steps), create("a"), PROJECT, NOW, record_hit=True)  # type: ignore[arg-type]
    assert not found.created and found.step == cached
    assert found.recorded is not None and found.recorded.name == "a"
    expected = (
        ["find_cached_or_create record_hit=True"]
        if steps_type is BatchSteps
        else ["find_cached k", "create a"]
    )
    assert steps.calls == expected


def test_reusing_records_what_the_cached_step_run_needs() -> None:
    cached = step_record(
        "original",
        status=ExecutionStatus.COMPLETED,
        outputs={"x": uuid.uuid4()},
        source_code="old source",
        docstring="Old.",
        cache_expires_at=NOW,
        logs_uri="/logs/original.log",
    )
    step = create("a").model_copy(
        update={"docstring": "New.", "logs_uri": "/logs/a.log", "runtime": StepRuntime.INLINE}
    )
    hit = step.reusing(cached)
    assert hit.model_dump() == {
        **step.model_dump(),
        "status": ExecutionStatus.CACHED,
        "cache_expires_at": NOW,
        "original_step_run_id": cached.id,
        "outputs": cached.outputs,
        "source_code": "old source",  # the step's own is unknown here
        "docstring": "New.",
        "logs_uri": "/logs/original.log",
        "runtime": None,
    }


def test_the_fallback_needs_a_cache_key() -> None:
    step = StepRunCreate(run_id=RUN, name="a", status=ExecutionStatus.RUNNING)
    with pytest.raises(InputError, match="cache key"):
        find_cached_or_create(FakeStore(PlainSteps()), step, PROJECT, NOW)  # type: ignore[arg-type]


# ----------------------------------------------------------------- finish_step


def test_finish_is_one_call_with_the_capability() -> None:
    steps = BatchSteps()
    outputs = {"x": version_create("p::s::x")}
    record, versions = finish_step(
        FakeStore(steps),  # type: ignore[arg-type]
        uuid.uuid4(),
        StepRunUpdate(status=ExecutionStatus.COMPLETED),
        outputs,
    )
    assert steps.calls == ["finish ['x']"]
    assert record.status is ExecutionStatus.COMPLETED and set(versions) == {"x"}


def test_finish_fallback_creates_versions_before_the_update_that_links_them() -> None:
    steps, artifacts = PlainSteps(), PlainArtifacts()
    outputs = {"x": version_create("p::s::x"), "y": version_create("p::s::y")}
    earlier = uuid.uuid4()
    record, versions = finish_step(
        FakeStore(steps, artifacts),  # type: ignore[arg-type]
        uuid.uuid4(),
        StepRunUpdate(status=ExecutionStatus.COMPLETED, outputs={"z": earlier}),
        outputs,
    )
    assert artifacts.calls == ["create_version p::s::x", "create_version p::s::y"]
    assert steps.calls == ["update completed"]
    assert record.outputs == {"z": earlier, "x": versions["x"].id, "y": versions["y"].id}


def test_several_outputs_use_the_batch_of_a_store_that_has_one() -> None:
    artifacts = BatchArtifacts()
    store = FakeStore(PlainSteps(), artifacts)
    versions = create_versions(store, {"a": version_create("a"), "b": version_create("b")})  # type: ignore[arg-type]
    assert artifacts.calls == ["create_versions ['a', 'b']"]
    assert [v.name for v in versions.values()] == ["a", "b"]
    create_versions(store, {"c": version_create("c")})  # type: ignore[arg-type]
    assert artifacts.calls[-1] == "create_version c"  # one version: the plain call


# ----------------------------------------------------------------- known versions


def test_known_versions_read_only_what_they_miss() -> None:
    artifacts = PlainArtifacts()
    store = FakeStore(PlainSteps(), artifacts)
    producer = uuid.uuid4()
    made = {
        n: artifacts.create_version(
            version_create(n).model_copy(update={"producer_step_run_id": producer})
        )
        for n in ("a", "b", "c")
    }
    step = step_record(id=producer, outputs={n: v.id for n, v in made.items()})
    known = KnownVersions()
    known.remember([made["a"]])
    artifacts.calls.clear()
    assert known.outputs_of(store, step) == made  # type: ignore[arg-type]
    assert artifacts.calls == ["list_versions"]  # b and c in one call
    assert known.outputs_of(store, step) == made  # type: ignore[arg-type]
    assert artifacts.calls == ["list_versions"]  # now all known
    single = step_record(outputs={"a": made["a"].id})
    assert KnownVersions().outputs_of(store, single) == {"a": made["a"]}  # type: ignore[arg-type]
    assert artifacts.calls[-1] == "get_version"


def test_known_versions_take_and_remember_those_sent_along() -> None:
    artifacts = PlainArtifacts()
    store = FakeStore(PlainSteps(), artifacts)
    made = {n: artifacts.create_version(version_create(n)) for n in ("a", "b")}
    step = step_record(outputs={n: v.id for n, v in made.items()})
    known = KnownVersions()
    artifacts.calls.clear()
    assert known.outputs_of(store, step, [made["a"]]) == made  # type: ignore[arg-type]
    assert artifacts.calls == ["get_version"]  # only b
    assert known.outputs_of(store, step) == made  # type: ignore[arg-type]
    assert artifacts.calls == ["get_version"]  # both remembered now


def test_known_versions_forget_the_least_recently_used() -> None:
    known = KnownVersions(limit=2)
    a, b, c = (version_record(version_create(n)) for n in "abc")
    known.remember([a, b])
    assert known.outputs_of(FakeStore(PlainSteps()), step_record(outputs={"a": a.id}))  # type: ignore[arg-type]
    known.remember([c])  # b was used least recently
    assert len(known) == 2
    artifacts = PlainArtifacts()
    artifacts.stored[b.id] = b
    known.outputs_of(FakeStore(PlainSteps(), artifacts), step_record(outputs={"b": b.id}))  # type: ignore[arg-type]
    assert artifacts.calls == ["get_version"]


# ----------------------------------------------------------------- the SQL store


def test_the_sql_store_offers_the_capabilities(tmp_path: Path) -> None:
    with SqlStore.open(f"sqlite:///{tmp_path / 'w.db'}") as store:
        assert isinstance(store.steps, StepRunBatchOperations)
        assert isinstance(store.artifacts, ArtifactBatchOperations)
        project = store.projects.create("p")
        pipeline = store.pipelines.get_or_create(project.id, "p")
        from wharf.config.spec import PipelineSpec

        snapshot = store.snapshots.create(
            SnapshotCreate(
                project_id=project.id, pipeline_id=pipeline.id, spec=PipelineSpec(name="p")
            )
        )
        run = store.runs.create(
            RunCreate(
                project_id=project.id, pipeline_id=pipeline.id, snapshot_id=snapshot.id, name="r"
            )
        )
        step = StepRunCreate(run_id=run.id, name="s", status=ExecutionStatus.RUNNING, cache_key="k")
        found = find_cached_or_create(store, step, project.id, NOW)
        assert found.created
        record = found.step
        output = version_create("p::s::out").model_copy(
            update={"project_id": project.id, "producer_step_run_id": record.id}
        )
        final, versions = finish_step(
            store, record.id, StepRunUpdate(status=ExecutionStatus.COMPLETED), {"out": output}
        )
        assert final.status is ExecutionStatus.COMPLETED
        assert final.outputs == {"out": versions["out"].id}
        again = step.model_copy(update={"name": "t"})
        hit = find_cached_or_create(store, again, project.id, datetime.now(UTC), record_hit=True)
        assert not hit.created and hit.step.id == record.id
        assert hit.outputs == versions  # sent along: a fresh process need not read them
        assert hit.recorded == store.steps.get(hit.recorded.id if hit.recorded else record.id)
        assert hit.recorded.status is ExecutionStatus.CACHED
        assert hit.recorded.original_step_run_id == record.id
        assert hit.recorded.outputs == final.outputs and hit.recorded.name == "t"
