"""Contract: ``RunRepository.get_or_create`` and its placeholder replacement rules."""

from __future__ import annotations

import pytest

from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import IllegalTransitionError
from wharf.store.models import RunFilter


def test_creates_when_nothing_matches(world: World) -> None:
    run, created = world.store.runs.get_or_create(world.run_create(status=S.RUNNING))
    assert created and run.status is S.RUNNING and run.start_time == run.created
    assert world.store.runs.get(run.id) == run


def test_returns_existing_run_with_same_orchestrator_run_id(world: World) -> None:
    first, created = world.store.runs.get_or_create(
        world.run_create(status=S.RUNNING, orchestrator_run_id="o")
    )
    again, created_again = world.store.runs.get_or_create(
        world.run_create(status=S.RUNNING, orchestrator_run_id="o", name="other")
    )
    assert created and not created_again
    assert again == first


def test_placeholder_request_returns_existing_placeholder_with_same_id(world: World) -> None:
    placeholder = world.run(orchestrator_run_id="o")
    run, created = world.store.runs.get_or_create(world.run_create(orchestrator_run_id="o"))
    assert (run, created) == (placeholder, False)


def test_replaces_placeholder_with_null_id(world: World) -> None:
    placeholder = world.run()
    run, created = world.store.runs.get_or_create(
        world.run_create(status=S.RUNNING, name="real", orchestrator_run_id="o")
    )
    assert created and run.id == placeholder.id
    assert (run.status, run.name, run.orchestrator_run_id) == (S.RUNNING, "real", "o")
    assert run.start_time is not None and run.created == placeholder.created
    assert world.store.runs.get(run.id) == run
    assert world.store.runs.list().total == 1


def test_matching_id_wins_over_null_then_oldest(world: World) -> None:
    oldest_null = world.run(status=S.PROVISIONING)
    matching = world.run(orchestrator_run_id="o")
    world.run()  # a younger NULL placeholder
    run, _ = world.store.runs.get_or_create(
        world.run_create(status=S.RUNNING, orchestrator_run_id="o")
    )
    assert run.id == matching.id
    # Without a matching one, the oldest NULL placeholder is taken (whatever the NULL order).
    second, _ = world.store.runs.get_or_create(
        world.run_create(status=S.RUNNING, orchestrator_run_id="p")
    )
    assert second.id == oldest_null.id
    third, _ = world.store.runs.get_or_create(world.run_create(status=S.QUEUED))
    assert third.orchestrator_run_id is None and third.status is S.QUEUED
    assert world.store.runs.list(RunFilter(status=S.INITIALIZING)).total == 0


def test_non_matching_id_is_never_replaced(world: World) -> None:
    other = world.run(orchestrator_run_id="other")
    run, created = world.store.runs.get_or_create(
        world.run_create(status=S.RUNNING, orchestrator_run_id="o")
    )
    assert created and run.id != other.id
    assert world.store.runs.get(other.id) == other


def test_placeholder_request_never_replaces(world: World) -> None:
    placeholder = world.run()
    run, created = world.store.runs.get_or_create(world.run_create(status=S.PROVISIONING))
    assert created and run.id != placeholder.id
    assert world.store.runs.get(placeholder.id) == placeholder


def test_only_placeholders_of_same_snapshot_pipeline_and_project(world: World) -> None:
    other_snapshot = world.other_snapshot()
    foreign = world.run(snapshot_id=other_snapshot.id)
    running = world.run(status=S.RUNNING)  # not a placeholder
    run, created = world.store.runs.get_or_create(world.run_create(status=S.RUNNING))
    assert created and run.id not in (foreign.id, running.id)


def test_illegal_replacement_changes_nothing(world: World) -> None:
    placeholder = world.run()
    with pytest.raises(IllegalTransitionError):
        world.store.runs.get_or_create(world.run_create(status=S.CACHED))
    assert world.store.runs.get(placeholder.id) == placeholder
    assert world.store.runs.list().total == 1


def test_replacing_with_a_finished_status_sets_end_time(world: World) -> None:
    world.run()
    run, _ = world.store.runs.get_or_create(world.run_create(status=S.FAILED))
    assert run.status is S.FAILED and run.end_time is not None and run.start_time is None
