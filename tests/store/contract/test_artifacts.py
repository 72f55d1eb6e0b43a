"""Contract: artifacts created on first version, version numbering, lookups and filters."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World
from wharf.core.errors import EntityNotFoundError
from wharf.store.models import ArtifactFilter, ArtifactVersionFilter


def test_versions_count_per_artifact(world: World, clock: FakeClock) -> None:
    store_id = uuid.uuid4()
    first = world.version("model", content_hash="sha", artifact_store_id=store_id)
    assert (first.version, first.name, first.content_hash) == (1, "model", "sha")
    assert first.artifact_store_id == store_id and first.created == clock.now
    second = world.version("model")
    other = world.version("data")
    assert second.version == 2 and second.artifact_id == first.artifact_id
    assert other.version == 1 and other.artifact_id != first.artifact_id
    assert world.store.artifacts.get_version(second.id) == second
    artifact = world.store.artifacts.get(first.artifact_id)
    assert (artifact.name, artifact.project_id) == ("model", world.project.id)
    assert artifact.created == first.created


def test_same_name_in_another_project_is_another_artifact(world: World) -> None:
    mine = world.version("model")
    other_project = world.store.projects.create("other")
    theirs = world.version("model", project_id=other_project.id)
    assert theirs.version == 1 and theirs.artifact_id != mine.artifact_id


def test_errors(world: World) -> None:
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError) as info:
        world.store.artifacts.get_version(missing)
    assert str(info.value) == f"No artifact version with id {missing}."
    with pytest.raises(EntityNotFoundError, match=f"No artifact with id {missing}"):
        world.store.artifacts.get(missing)
    with pytest.raises(EntityNotFoundError, match=f"No project with id {missing}"):
        world.version(project_id=missing)
    with pytest.raises(EntityNotFoundError, match=f"No step run with id {missing}"):
        world.version(producer_step_run_id=missing)
    assert world.store.artifacts.list().total == 0  # nothing half-created


def test_list_and_filters(world: World) -> None:
    step = world.step()
    m1 = world.version("model", producer_step_run_id=step.id)
    d1 = world.version("data")
    m2 = world.version("model")
    arts = world.store.artifacts
    assert [v.id for v in arts.list_versions().items] == [m2.id, d1.id, m1.id]
    assert arts.list_versions(ArtifactVersionFilter(name="model")).items == [m2, m1]
    assert arts.list_versions(ArtifactVersionFilter(artifact_id=d1.artifact_id)).items == [d1]
    by_producer = ArtifactVersionFilter(producer_step_run_id=step.id)
    assert arts.list_versions(by_producer).items == [m1]
    assert arts.list_versions(ArtifactVersionFilter(project_id=uuid.uuid4())).total == 0
    assert arts.list_versions(ArtifactVersionFilter(project_id=world.project.id)).total == 3
    assert [a.name for a in arts.list().items] == ["data", "model"]
    assert [a.name for a in arts.list(ArtifactFilter(name="model")).items] == ["model"]
    assert arts.list(ArtifactFilter(project_id=world.project.id)).total == 2
