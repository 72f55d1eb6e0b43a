"""Schedules on Kubernetes without a cluster: what is refused (and that a refused schedule is
not kept), the CronJob's name, the pod's ``--schedule-id`` argument and the start/end window the
fired pod checks. The CronJob itself, its firing and pausing are in ``test_schedules``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import pytest

from wharf import Schedule, pipeline, step
from wharf.config.global_config import SERVER_URL_ENV, load_config
from wharf.core.enums import ComponentType
from wharf.core.errors import InputError
from wharf.integrations.kubernetes.labels import is_dns1123_label
from wharf.integrations.kubernetes.orchestrator_launch import OrchestratorArgs
from wharf.integrations.kubernetes.schedules import (
    check_schedulable,
    cron_job_name,
    scheduled_arguments,
    split_schedule_id,
)
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.store.models import ScheduleRecord
from wharf.store.schedule_window import in_window

START = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)


@step
def one() -> int:
    return 1


@pipeline(code_source="image", schedule=Schedule(name="nightly", cron_expression="0 3 * * *"))
def nightly() -> None:
    one()


@pipeline(
    code_source="image",
    schedule=Schedule(name="catching-up", cron_expression="0 3 * * *", catchup=True),
)
def catching_up() -> None:
    one()


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A workspace whose active stack runs on Kubernetes with the local artifact store."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", SERVER_URL_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "k8s")
    ws = Workspace.open(load_config())
    config = {"image": "wharf/python:3.11"}
    stacks.register_component(ws, "k8s", ComponentType.ORCHESTRATOR, "kubernetes", config)
    stacks.register_stack(ws, "k8s", orchestrator="k8s", artifact_store="default")
    yield ws
    ws.close()


def test_a_schedule_the_orchestrator_refuses_is_not_kept(workspace: Workspace) -> None:
    with pytest.raises(InputError, match="local artifact store"):
        nightly.run_in(workspace)
    assert workspace.store.schedules.list().items == []
    assert workspace.store.runs.list().items == []


def test_catching_up_is_refused_before_anything_is_recorded(workspace: Workspace) -> None:
    with pytest.raises(InputError, match=r"do not catch up.*starting_deadline_seconds"):
        catching_up.run_in(workspace)
    assert workspace.store.schedules.list().items == []
    assert workspace.store.runs.list().items == []


def test_kubernetes_refuses_a_cron_expression_with_seconds_saying_what_it_takes() -> None:
    """A schedule that skipped validation (say, recorded by an older Wharf) with croniter's
    seconds field is refused before any CronJob, naming the five fields Kubernetes takes."""
    seconds = Schedule.model_construct(cron_expression="*/10 * * * * *", catchup=False)
    with pytest.raises(InputError, match=r"not a cron expression Kubernetes takes: give five"):
        check_schedulable("nightly", seconds)
    check_schedulable("nightly", Schedule(cron_expression="0 3 * * *"))


def test_the_schedule_id_argument_round_trips_and_a_bad_one_is_refused() -> None:
    schedule_id = UUID(int=7)
    args = OrchestratorArgs(UUID(int=1), None, "ml", "wharf-nightly", "{}", None)
    found, rest = split_schedule_id(scheduled_arguments(args, schedule_id))
    assert found == schedule_id and "--schedule-id" not in rest
    assert split_schedule_id(["--snapshot-id", "x"]) == (None, ["--snapshot-id", "x"])
    with pytest.raises(ValueError):
        split_schedule_id(["--schedule-id", "not-a-uuid"])
    with pytest.raises(ValueError):
        split_schedule_id(["--schedule-id"])


def record(
    schedule_id: int,
    name: str = "nightly",
    start: datetime | None = None,
    end: datetime | None = None,
) -> ScheduleRecord:
    return ScheduleRecord(
        id=UUID(int=schedule_id << 100),  # ids that differ in their first hex digits
        project_id=UUID(int=schedule_id + 100),
        pipeline_id=UUID(int=3),
        snapshot_id=UUID(int=4),
        name=name,
        cron_expression="0 3 * * *",
        interval_seconds=None,
        run_once_start_time=None,
        start_time=start,
        end_time=end,
        catchup=False,
        active=True,
        created=START,
    )


def test_cron_job_names_fit_and_two_schedules_of_one_name_never_share_one() -> None:
    long_name = "The Nightly Training Schedule Of The Vision Team " * 3
    first, second = (
        cron_job_name(None, record(1, long_name)),
        cron_job_name(None, record(2, long_name)),
    )
    assert first != second
    assert all(len(n) <= 52 and is_dns1123_label(n) for n in (first, second))
    assert cron_job_name("team", record(1)).startswith("team-nightly-")


def test_a_fired_pod_runs_only_within_the_start_and_end_times() -> None:
    later = START.replace(hour=12)
    windowed = record(1, start=START, end=later.replace(tzinfo=None))  # naive: UTC
    assert not in_window(windowed, START.replace(hour=9))
    assert in_window(windowed, START) and in_window(windowed, later)
    assert not in_window(windowed, later.replace(minute=1))
    assert in_window(record(2), START)


def test_a_scheduled_call_returns_its_schedule_and_explains_the_missing_run() -> None:
    from wharf.sdk.scheduling import Scheduled

    scheduled = Scheduled(record(1))
    assert scheduled.schedule.name == "nightly"
    assert "scheduled as 'nightly'" in repr(scheduled)
    with pytest.raises(
        AttributeError, match=r"No run was made \(so no 'status'\).*wharf runs list"
    ):
        _ = scheduled.status
