"""Known versions: a cached step's outputs are read from the store only when this process does
not know them, in one list call when several are missing (fake artifact repositories record
their calls)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from wharf.core.enums import ExecutionStatus
from wharf.execution.known_versions import KnownVersions
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    Page,
    StepRunRecord,
)

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


class FakeStore:
    def __init__(self, artifacts: PlainArtifacts | None = None) -> None:
        self.artifacts = artifacts or PlainArtifacts()


# ----------------------------------------------------------------- known versions


def test_known_versions_read_only_what_they_miss() -> None:
    artifacts = PlainArtifacts()
    store = FakeStore(artifacts)
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
    store = FakeStore(artifacts)
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
    assert known.outputs_of(FakeStore(), step_record(outputs={"a": a.id}))  # type: ignore[arg-type]
    known.remember([c])  # b was used least recently
    assert len(known) == 2
    artifacts = PlainArtifacts()
    artifacts.stored[b.id] = b
    known.outputs_of(FakeStore(artifacts), step_record(outputs={"b": b.id}))  # type: ignore[arg-type]
    assert artifacts.calls == ["get_version"]
