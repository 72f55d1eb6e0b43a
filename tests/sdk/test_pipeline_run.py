"""``Pipeline.run_in``: what a pipeline call records, in which order, and what it leaves behind
when something fails before the orchestrator has taken the run over."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import steps_lib
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.config.settings import Schedule
from wharf.core.enums import ComponentType
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import EntityExistsError, InputError, PipelineDefinitionError
from wharf.orchestrators.base import RunJob
from wharf.orchestrators.local import LocalOrchestrator
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.store.models import PipelineRunRecord


@pipeline
def chain(value: int = 1) -> None:
    steps_lib.double(steps_lib.produce(value=value))


def test_a_local_run_is_recorded_running_from_the_start(workspace: Workspace) -> None:
    run = chain.run_in(workspace)
    assert run.status is S.COMPLETED, run.status_reason
    assert run.orchestrator_run_id is not None and run.orchestrator_run_id.startswith("local-")
    assert run.start_time == run.created and run.end_time is not None
    assert workspace.store.runs.get(run.id) == run
    snapshot = workspace.store.snapshots.get(run.snapshot_id)
    assert snapshot.stack_id == workspace.active_stack().id
    assert snapshot.spec.steps.keys() == {"produce", "double"}
    assert workspace.store.runs.list().total == 1


def test_each_run_gets_its_own_snapshot(workspace: Workspace) -> None:
    first, second = chain.run_in(workspace), chain.run_in(workspace)
    assert first.pipeline_id == second.pipeline_id
    assert first.snapshot_id != second.snapshot_id


def test_an_orchestrator_that_starts_runs_elsewhere_gets_a_placeholder(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed: list[PipelineRunRecord] = []
    original = LocalOrchestrator.submit_run

    def run(self: LocalOrchestrator, job: RunJob) -> PipelineRunRecord:
        handed.append(job.run)
        return original(self, job)

    monkeypatch.setattr(LocalOrchestrator, "starts_runs_in_process", False)
    monkeypatch.setattr(LocalOrchestrator, "submit_run", run)
    done = chain.run_in(workspace)
    assert handed[0].is_placeholder and handed[0].orchestrator_run_id is None
    assert done.id == handed[0].id and done.status is S.COMPLETED
    assert done.orchestrator_run_id is not None and done.orchestrator_run_id.startswith("local-")


def test_a_run_the_orchestrator_never_took_over_ends_failed(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: LocalOrchestrator, job: RunJob) -> PipelineRunRecord:
        raise RuntimeError("no thread for you")

    monkeypatch.setattr(LocalOrchestrator, "submit_run", broken)
    with pytest.raises(RuntimeError, match="no thread"):
        chain.run_in(workspace)
    (run,) = workspace.store.runs.list().items
    assert run.status is S.FAILED and run.end_time is not None
    assert run.status_reason is not None and "no thread for you" in run.status_reason


def test_a_placeholder_nobody_started_is_deleted(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: LocalOrchestrator, job: RunJob) -> PipelineRunRecord:
        raise RuntimeError("cluster unreachable")

    monkeypatch.setattr(LocalOrchestrator, "starts_runs_in_process", False)
    monkeypatch.setattr(LocalOrchestrator, "submit_run", broken)
    with pytest.raises(RuntimeError):
        chain.run_in(workspace)
    assert workspace.store.runs.list().total == 0


def test_a_schedule_that_cannot_be_recorded_leaves_no_run(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    @pipeline(schedule=Schedule(cron_expression="0 * * * *"))
    def scheduled() -> None:
        steps_lib.produce(value=3)

    def refuse(*_: Any) -> None:
        raise RuntimeError("schedules are down")

    monkeypatch.setattr(workspace.store.schedules, "create", refuse)
    with pytest.raises(RuntimeError, match="schedules are down"):
        scheduled.run_in(workspace)
    assert workspace.store.runs.list().total == 0


def test_a_schedule_that_has_already_ended_is_refused_and_leaves_nothing(
    workspace: Workspace,
) -> None:
    """It would never fire. Its snapshot's ``Schedule`` is still read back after it ends."""
    ended = datetime(2020, 1, 1, 6, tzinfo=UTC)

    @pipeline(schedule=Schedule(cron_expression="0 * * * *", end_time=ended))
    def expired() -> None:
        steps_lib.produce(value=3)

    with pytest.raises(InputError) as refused:
        expired.run_in(workspace)
    assert str(refused.value) == (
        "The schedule's end_time (2020-01-01 06:00:00 UTC) has already passed, so it would "
        "never fire: give a later end_time, or none."
    )
    assert workspace.store.runs.list().total == 0
    assert workspace.store.schedules.list().total == 0
    assert Schedule(interval_seconds=60, end_time=ended).end_time == ended


def test_runs_follow_a_change_of_active_stack(workspace: Workspace, tmp_path: Path) -> None:
    first = chain.run_in(workspace, value=5)
    path = tmp_path / "prod-artifacts"
    stacks.register_component(workspace, "prod", ComponentType.ORCHESTRATOR, "local")
    stacks.register_component(
        workspace, "prod", ComponentType.ARTIFACT_STORE, "local", {"path": str(path)}
    )
    stacks.register_stack(workspace, "prod", orchestrator="prod", artifact_store="prod")
    workspace.config = load_config({"WHARF_ACTIVE_STACK": "prod"}, home=workspace.config.home)
    second = chain.run_in(workspace, value=5)
    snapshots = workspace.store.snapshots
    prod = workspace.active_stack()
    assert snapshots.get(first.snapshot_id).stack_id != snapshots.get(second.snapshot_id).stack_id
    assert snapshots.get(second.snapshot_id).stack_id == prod.id
    # The artifact store is part of the cache key: the new stack's store runs the steps again.
    produced = workspace.store.steps.list().items
    statuses = [s.status for s in produced if s.run_id == second.id]
    assert statuses == [S.COMPLETED, S.COMPLETED]
    assert any(path in Path(p).parents for p in _uris(workspace, second))


def _uris(workspace: Workspace, run: PipelineRunRecord) -> list[str]:
    steps = [s for s in workspace.store.steps.list().items if s.run_id == run.id]
    return [workspace.store.artifacts.get_version(v).uri for s in steps for v in s.outputs.values()]


def test_running_a_scheduled_script_again_keeps_the_same_schedule(
    workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    def scheduled(cron: str) -> Any:
        @pipeline(name="nightly", schedule=Schedule(cron_expression=cron, name="every-night"))
        def nightly() -> None:
            steps_lib.produce(value=3)

        return nightly

    with caplog.at_level(logging.WARNING, logger="wharf.sdk.scheduling"):
        first = scheduled("0 3 * * *").run_in(workspace)
        second = scheduled("0 3 * * *").run_in(workspace)  # the same script run again
    assert first.status is S.COMPLETED and second.status is S.COMPLETED
    assert [s.name for s in workspace.store.schedules.list().items] == ["every-night"]
    told_by = "wharf.sdk.scheduling"
    told = [r.getMessage() for r in caplog.records if r.name == told_by]
    assert len(told) == 2 and all("\n" not in line for line in told)
    assert "recorded schedule 'every-night'" in told[0]
    assert "kept the existing schedule 'every-night'" in told[1]
    assert all("runs the pipeline once, now" in line for line in told)
    assert all("`wharf schedule delete every-night`" in line for line in told)
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == told_by)

    with pytest.raises(EntityExistsError) as info:
        scheduled("0 4 * * *").run_in(workspace)  # another definition under that name
    message = str(info.value)
    assert "\n" not in message
    assert "a different schedule named 'every-night'" in message
    assert "`wharf schedule delete every-night`" in message
    assert workspace.store.runs.list().total == 2  # the refused call left no run


def test_a_run_whose_steps_stay_on_this_machine_records_no_code_archive(
    workspace: Workspace,
) -> None:
    run = chain.run_in(workspace)
    assert workspace.store.snapshots.get(run.snapshot_id).spec.code is None
    assert not (workspace.config.artifact_root / "code").exists()


def test_an_unknown_code_source_is_refused_where_the_pipeline_is_defined() -> None:
    with pytest.raises(PipelineDefinitionError, match="Unknown code_source 'docker'"):
        pipeline(code_source="docker")(lambda: None)  # type: ignore[call-overload]


def test_a_schedule_an_orchestrator_fires_is_told_as_news_not_a_warning(
    workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    """Scheduling on Kubernetes (normal use) was logged as a WARNING."""
    from wharf.sdk.scheduling import record_schedule

    run = steps_pipeline_run(workspace)
    with caplog.at_level(logging.INFO, logger="wharf.sdk.scheduling"):
        record_schedule(
            "nightly",
            workspace,
            run.pipeline_id,
            run.snapshot_id,
            Schedule(cron_expression="0 3 * * *", name="fired"),
            fired_by_orchestrator=True,
        )
    (told,) = [r for r in caplog.records if r.name == "wharf.sdk.scheduling"]
    assert told.levelno == logging.INFO
    assert "The orchestrator fires its runs; none runs now." in told.getMessage()


def steps_pipeline_run(workspace: Workspace) -> PipelineRunRecord:
    @pipeline(name="nightly")
    def nightly() -> None:
        steps_lib.produce(value=3)

    return nightly.run_in(workspace)
